package main

import (
	"strings"
	"testing"
)

func TestParseDiskFiles(t *testing.T) {
	body := []byte(`# HELP raftmq_disk_write_bytes_total Bytes this node wrote to disk by file.
# TYPE raftmq_disk_write_bytes_total counter
raftmq_disk_write_bytes_total{file="commitlog"} 1.2345e+07
raftmq_disk_write_bytes_total{file="raftlog"} 4096
raftmq_disk_write_bytes_totalx{file="index"} 7
raftmq_store_bytes 99
`)
	got := parseDiskFiles(body)
	if len(got) != 2 || got["commitlog"] != 12345000 || got["raftlog"] != 4096 {
		t.Fatalf("parsed %v", got)
	}
}

func TestDiskFilesTable(t *testing.T) {
	before := []map[string]int64{{"raftlog": 100, "commitlog": 50}, nil}
	after := []map[string]int64{{"raftlog": 1100, "commitlog": 1250, "index": 30}, {"raftlog": 5}}
	if d := diskFilesDelta(before, after, 1); d != nil {
		t.Fatalf("delta without a before scrape: %v", d)
	}
	d := diskFilesDelta(before, after, 0)
	rows := []Row{{Name: "r", LogStore: "wal", Load: &load{Size: 100},
		RaftmqRuns: []Summary{{Count: 10, DiskByFile: d}}}}
	table := diskFilesTable(rows)
	for _, want := range []string{"| row | log store | raftlog | commitlog | index | sum |", "| r | wal | 1.000 | 1.200 | 0.030 | 2.23 |"} {
		if !strings.Contains(table, want) {
			t.Fatalf("table lacks %q:\n%s", want, table)
		}
	}
	if diskFilesTable([]Row{{Name: "ceiling only"}}) != "" {
		t.Fatal("a table without metered runs")
	}
}
