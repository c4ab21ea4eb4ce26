package redislock

import (
	"testing"
)

// An INFO reply as Redis 7 sends it: sections, CRLF, fields with colons in
// their values.
const infoText = "# Memory\r\nused_memory:965136\r\nmaxmemory:2097152\r\nmaxmemory_human:2.00M\r\n" +
	"maxmemory_policy:allkeys-lru\r\n\r\n# Persistence\r\nrdb_last_bgsave_time_sec:-1\r\nrdb_saves:0\r\n" +
	"aof_enabled:1\r\n\r\n# Cluster\r\ncluster_enabled:0\r\n# Keyspace\r\ndb0:keys=1,expires=0,avg_ttl=0\r\n"

func TestParseInfo_FieldsAcrossSections(t *testing.T) {
	f := ParseInfo(infoText)
	for k, want := range map[string]string{"maxmemory": "2097152", "maxmemory_policy": "allkeys-lru",
		"aof_enabled": "1", "cluster_enabled": "0", "db0": "keys=1,expires=0,avg_ttl=0", "rdb_saves": "0"} {
		if got, ok := f[k]; !ok || got != want {
			t.Errorf("field %s: got %q (present %v), want %q", k, got, ok, want)
		}
	}
	if _, ok := f["# Memory"]; ok {
		t.Errorf("section header parsed as a field")
	}
	if got := ParseInfo("a:1\nb:2\n"); got["a"] != "1" || got["b"] != "2" {
		t.Errorf("LF lines: got %v, want a=1 b=2", got)
	}
}

func TestServerInfo_Fields(t *testing.T) {
	for _, tc := range []struct {
		name   string
		text   string
		want   ServerInfo
		evicts bool
	}{
		{"limit and evicting policy", infoText,
			ServerInfo{Key: "k", MaxMemory: 2097152, MaxMemoryPolicy: "allkeys-lru", AOF: true}, true},
		{"no limit: nothing is evicted whatever the policy", "maxmemory:0\r\nmaxmemory_policy:allkeys-lru\r\n",
			ServerInfo{Key: "k", MaxMemoryPolicy: "allkeys-lru"}, false},
		{"limit with noeviction", "maxmemory:100\r\nmaxmemory_policy:noeviction\r\n",
			ServerInfo{Key: "k", MaxMemory: 100, MaxMemoryPolicy: "noeviction"}, false},
		{"volatile policy evicts leases", "maxmemory:100\r\nmaxmemory_policy:volatile-lru\r\n",
			ServerInfo{Key: "k", MaxMemory: 100, MaxMemoryPolicy: "volatile-lru"}, true},
		{"limit without a policy field is treated as evicting", "maxmemory:100\r\n",
			ServerInfo{Key: "k", MaxMemory: 100}, true},
		{"a background save was seen", "rdb_last_bgsave_time_sec:0\r\nrdb_saves:0\r\n",
			ServerInfo{Key: "k", SnapshotSeen: true}, false},
		{"a save was counted (Redis 7)", "rdb_last_bgsave_time_sec:-1\r\nrdb_saves:3\r\n",
			ServerInfo{Key: "k", SnapshotSeen: true}, false},
		{"cluster node", "cluster_enabled:1\r\n", ServerInfo{Key: "k", ClusterEnabled: true}, false},
		{"malformed numbers keep zero values", "maxmemory:lots\r\nrdb_saves:x\r\nrdb_last_bgsave_time_sec:y\r\n",
			ServerInfo{Key: "k"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := serverInfo("k", ParseInfo(tc.text))
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			if got.Evicts() != tc.evicts {
				t.Errorf("Evicts: got %v, want %v", got.Evicts(), tc.evicts)
			}
		})
	}
}
