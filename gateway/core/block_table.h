// The blocks in force (rules/block_list.h), as admit reads them: a
// snapshot replaced whole by the admin API (and, on Redis, by its refresh).
// Made once per process, it outlives configurations: blocks survive
// reloads. While no block exists a request pays one atomic load; while some
// do, one more lookup in the snapshot (see SnapshotTable). Thread-safe.
#pragma once

#include "gateway/core/snapshot_table.h"
#include "rules/block_list.h"

namespace tollgate::gateway {

using BlockTable = SnapshotTable<rules::BlockList>;

}  // namespace tollgate::gateway
