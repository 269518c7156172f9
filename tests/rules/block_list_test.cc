// rules::BlockList: which block a client meets, by network (IPv4 in its own
// trie, IPv6, and IPv6 networks that hold IPv4-mapped addresses), user and
// header value; the shortest matching network first; over at its end; the
// last of one id wins.
#include "rules/block_list.h"

#include <gtest/gtest.h>

namespace tollgate::rules {
namespace {

struct Headers final : HeaderLookup {
  std::string name, value;
  std::string_view Get(std::string_view n) const override {
    return n == name ? std::string_view(value) : std::string_view();
  }
  std::string GetJoined(std::string_view n) const override { return std::string(Get(n)); }
};

Block Network(std::string_view cidr, unsigned status = 403, std::int64_t expires = 1000) {
  Block b;
  b.network = *Cidr::Parse(cidr);
  b.status = status;
  b.expires_unix_ms = expires;
  return b;
}

Identity Client(std::string_view ip, std::string user = "") {
  Identity id;
  id.client_ip = *IpAddress::Parse(ip);
  id.user = std::move(user);
  return id;
}

TEST(BlockList, Networks) {
  const BlockList list({Network("203.0.113.0/24", 401), Network("203.0.0.0/8", 402),
                        Network("2001:db8::/32", 403), Network("2001:db8:1::/48", 404)});
  const Headers none;
  auto status = [&](std::string_view ip) {
    const Block* b = list.Match(Client(ip), none, 0);
    return b == nullptr ? 0u : b->status;
  };
  EXPECT_EQ(status("203.0.113.9"), 402u);  // the shortest prefix first
  EXPECT_EQ(status("203.1.1.1"), 402u);
  EXPECT_EQ(status("204.0.113.9"), 0u);
  EXPECT_EQ(status("2001:db8:1::7"), 403u);
  EXPECT_EQ(status("2001:db9::7"), 0u);
  EXPECT_EQ(status("::ffff:203.0.113.9"), 402u);  // the same address
  Identity unidentified = Client("::");
  unidentified.unidentified_client = "unknown";
  EXPECT_EQ(list.Match(unidentified, none, 0), nullptr);
}

TEST(BlockList, IPv6NetworksThatHoldIPv4Addresses) {
  const Headers none;
  EXPECT_NE(BlockList({Network("::/0")}).Match(Client("192.0.2.1"), none, 0), nullptr);
  EXPECT_NE(BlockList({Network("::/80")}).Match(Client("192.0.2.1"), none, 0), nullptr);
  EXPECT_EQ(BlockList({Network("::/80")}).Match(Client("2001:db8::1"), none, 0), nullptr);
  EXPECT_NE(BlockList({Network("0.0.0.0/0")}).Match(Client("192.0.2.1"), none, 0), nullptr);
  EXPECT_EQ(BlockList({Network("0.0.0.0/0")}).Match(Client("2001:db8::1"), none, 0), nullptr);
}

TEST(BlockList, UsersHeadersExpiryAndIds) {
  Block user;
  user.kind = BlockKind::kUser;
  user.value = "mallory";
  user.expires_unix_ms = 1000;
  Block header;
  header.kind = BlockKind::kHeader;
  header.header = "x-api-key";
  header.value = "stolen";
  header.expires_unix_ms = 1000;
  Block replaced = Network("192.0.2.0/24", 403, 1000);
  Block replacing = Network("192.0.2.0/24", 451, 2000);
  const BlockList list({user, header, replaced, replacing});
  EXPECT_EQ(list.blocks().size(), 3u);
  Headers headers;
  EXPECT_EQ(list.Match(Client("198.51.100.1", "mallory"), headers, 999), &list.blocks()[0]);
  EXPECT_EQ(list.Match(Client("198.51.100.1", "mallory"), headers, 1000), nullptr);  // over
  headers.name = "x-api-key";
  headers.value = "stolen";
  EXPECT_EQ(list.Match(Client("198.51.100.1"), headers, 0)->Id(), "header:x-api-key:stolen");
  EXPECT_EQ(list.Match(Client("192.0.2.1"), Headers(), 1500)->status, 451u);
  EXPECT_EQ(list.blocks()[2].Id(), "ip:192.0.2.0/24");
  EXPECT_EQ(Network("2001:db8::/32").Id(), "ip:2001:db8::/32");
}

}  // namespace
}  // namespace tollgate::rules
