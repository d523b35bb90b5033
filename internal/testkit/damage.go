package testkit

import (
	"bytes"
	"database/sql"
	"encoding/binary"
	"fmt"
	"os"
	"strings"
	"testing"
)

// FillDatabase adds rows rows of about 3 KB each to the state table of the
// closed SQLite database at path (made by store.Open), so that most of
// the file's pages hold them, and checkpoints the WAL into the file.
func FillDatabase(t testing.TB, path string, rows int) {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i := range rows {
		if _, err := db.Exec(`INSERT INTO state (key, value, updated_at) VALUES (?, ?, 0)`,
			fmt.Sprintf("filler-%05d", i), strings.Repeat(fmt.Sprintf("row %05d ", i), 400)[:3000]); err != nil {
			t.Fatalf("fill %s: %v", path, err)
		}
	}
	if _, err := db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		t.Fatalf("checkpoint %s: %v", path, err)
	}
}

// OverwritePages overwrites n whole pages in the middle of the closed
// SQLite database file at path with garbage, as a failing disk or a stray
// write would, leaving its header and schema intact; from page first
// (numbered from 1) when first > 0.
func OverwritePages(t testing.TB, path string, first int64, n int) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	head := make([]byte, 100)
	if _, err := f.ReadAt(head, 0); err != nil {
		t.Fatalf("read the header of %s: %v", path, err)
	}
	size := int64(binary.BigEndian.Uint16(head[16:18]))
	if size == 1 {
		size = 65536
	}
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	pages := fi.Size() / size
	if pages < int64(2*n+2) {
		t.Fatalf("%s has %d pages, too few to overwrite %d in the middle", path, pages, n)
	}
	garbage := bytes.Repeat([]byte{0xA5, 0x5A, 0xFF, 0x00}, int(size)*n/4)
	at := pages / 2
	if first > 0 {
		at = first - 1
	}
	if _, err := f.WriteAt(garbage, at*size); err != nil {
		t.Fatal(err)
	}
}
