#include "test_pki.h"

#include <gtest/gtest.h>

namespace tollgate::testing {
namespace {

constexpr const char* kNewKey = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";

std::string CaConfig(const std::string& dir) {
  return "[ca]\ndefault_ca = test\n[test]\ndir = " + dir + "\ndatabase = " + dir +
         "/index.txt\nnew_certs_dir = " + dir + "/issued\nserial = " + dir +
         "/serial\ncrlnumber = " + dir +
         "/crlnumber\ndefault_md = sha256\npolicy = anything\ndefault_days = 30\n"
         "default_crl_days = 30\nunique_subject = no\ncopy_extensions = copy\n"
         "[anything]\ncommonName = supplied\norganizationName = optional\n"
         "organizationalUnitName = optional\n"
         "[client]\nbasicConstraints = CA:FALSE\nkeyUsage = digitalSignature\n"
         "extendedKeyUsage = clientAuth\n";
}

}  // namespace

TestPki::TestPki(const TempDir& dir) : dir_(dir.path() + "/pki") {
  ca_ = dir_ + "/ca.pem";
  ca_key_ = dir_ + "/ca.key";
  crl_ = dir_ + "/crl.pem";
  config_ = dir_ + "/ca.cnf";
  stranger_ = dir_ + "/stranger-ca.pem";
  stranger_key_ = dir_ + "/stranger-ca.key";
  Shell("mkdir -p " + dir_ + "/issued && touch " + dir_ + "/index.txt && echo 1000 > " + dir_ +
        "/serial && echo 01 > " + dir_ + "/crlnumber");
  dir.Write("pki/ca.cnf", CaConfig(dir_));
  for (const auto& [cert, key, name] : {std::tuple{ca_, ca_key_, "Test Client CA"},
                                        std::tuple{stranger_, stranger_key_, "Stranger CA"}}) {
    Shell(std::string("openssl req -x509 ") + kNewKey + " -days 30 -subj '/CN=" + name +
          "' -addext basicConstraints=critical,CA:TRUE -addext keyUsage=keyCertSign,cRLSign "
          "-keyout " + key + " -out " + cert + " 2>&1");
  }
  WriteCrl();
  auto [cert, key] = MakeCertificate(dir, "gateway.test");
  server_cert_ = cert;
  server_key_ = key;
}

std::string TestPki::OpenSslCa(const std::string& args) {
  return Shell("openssl ca -batch -config " + config_ + " -cert " + ca_ + " -keyfile " + ca_key_ +
               " " + args + " 2>&1");
}

ClientCert TestPki::Issue(const std::string& name, const std::string& subject,
                          const std::string& san, bool expired) {
  ClientCert out{dir_ + "/" + name + ".pem", dir_ + "/" + name + ".key"};
  const std::string csr = dir_ + "/" + name + ".csr";
  Shell(std::string("openssl req -new ") + kNewKey + " -subj '" + subject + "' " +
        (san.empty() ? "" : "-addext 'subjectAltName=" + san + "' ") + "-keyout " + out.key +
        " -out " + csr + " 2>&1");
  // -preserveDN: the subject in the request's order. Without it `openssl
  // ca` orders it as the policy section lists the fields, and a `preserve`
  // key would have to be in the [ca] section, not the CA's own (openssl-ca(1)).
  OpenSslCa("-preserveDN -notext -extensions client -in " + csr + " -out " + out.cert +
            (expired ? " -startdate 20200101000000Z -enddate 20200201000000Z" : ""));
  return out;
}

ClientCert TestPki::IssueByStranger(const std::string& name, const std::string& subject) {
  ClientCert out{dir_ + "/" + name + ".pem", dir_ + "/" + name + ".key"};
  Shell(std::string("openssl req -x509 ") + kNewKey + " -days 30 -subj '" + subject +
        "' -CA " + stranger_ + " -CAkey " + stranger_key_ + " -keyout " + out.key + " -out " +
        out.cert + " 2>&1");
  return out;
}

void TestPki::Revoke(const ClientCert& cert) { OpenSslCa("-revoke " + cert.cert); }

void TestPki::WriteCrl() { OpenSslCa("-gencrl -out " + crl_); }

std::string TlsTable(const TestPki& pki, const std::string& extra) {
  return TlsTable(pki.server_cert(), pki.server_key(), extra);
}

}  // namespace tollgate::testing
