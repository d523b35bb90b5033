package channels

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// ReadUpload reads the file at path for a FileSender, refusing one over
// max bytes; whose names the limit for the error ("Discord's upload
// limit"). It reads at most max+1 bytes, so a file that grows while it is
// read is refused too.
func ReadUpload(path string, max int64, whose string) ([]byte, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, max+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%s is larger than %s of %d MiB", filepath.Base(path), whose, max>>20)
	}
	return data, nil
}
