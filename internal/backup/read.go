package backup

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Read reads and checks an archive from r, copying state.bin to state as
// it goes, and returns its metadata. It fails, wrapping ErrInvalid, on
// anything but a whole archive whose every part matches its checksum:
// a foreign file, a truncated one, a flipped bit, a part missing, added or
// out of order. The caller must not use what was copied to state unless
// Read returns no error.
func Read(r io.Reader, state io.Writer) (Meta, error) {
	var meta Meta
	// gzip reads through br, a ByteReader, so it stops at its trailer and
	// what follows can be told apart.
	counted := &countingReader{r: r}
	br := bufio.NewReader(counted)
	gz, err := gzip.NewReader(br)
	if err != nil {
		return meta, invalid("not gzip-compressed (%v)", err)
	}
	gz.Multistream(false)
	tr := tar.NewReader(gz)
	got := map[string]string{}
	var sumsText []byte
	for _, want := range []string{metaName, stateName, sumsName} {
		hdr, err := tr.Next()
		if err != nil {
			return meta, invalid("part %s missing at byte %d (%v)", want, counted.n, err)
		}
		if hdr.Name != want {
			return meta, invalid("part %q where %s belongs", hdr.Name, want)
		}
		h := sha256.New()
		switch want {
		case stateName:
			if hdr.Size != meta.StateSize {
				return meta, invalid("state.bin holds %d bytes, meta.json says %d", hdr.Size, meta.StateSize)
			}
			if _, err := io.Copy(io.MultiWriter(state, h), tr); err != nil {
				return meta, invalid("state.bin cut short at byte %d of the file (%v)", counted.n, err)
			}
		default:
			if hdr.Size > maxMetaSize {
				return meta, invalid("part %s of %d bytes", want, hdr.Size)
			}
			b, err := io.ReadAll(tr)
			if err != nil {
				return meta, invalid("part %s cut short at byte %d of the file (%v)", want, counted.n, err)
			}
			h.Write(b)
			if want == metaName {
				if err := json.Unmarshal(b, &meta); err != nil {
					return meta, invalid("meta.json: %v", err)
				}
				if meta.Format != Format {
					return meta, invalid("format %d, this release reads format %d", meta.Format, Format)
				}
			} else {
				sumsText = b
			}
		}
		got[want] = hex.EncodeToString(h.Sum(nil))
	}
	if _, err := tr.Next(); !errors.Is(err, io.EOF) {
		return meta, invalid("more than the three parts (%v)", err)
	}
	// Drain the compressed stream: its trailer's CRC and length catch
	// what the tar layer cannot.
	if _, err := io.Copy(io.Discard, gz); err != nil {
		return meta, invalid("compressed stream damaged at byte %d (%v)", counted.n, err)
	}
	if n, _ := io.Copy(io.Discard, br); n > 0 {
		return meta, invalid("%d bytes after the end of the archive", n)
	}
	if err := checkSums(string(sumsText), got); err != nil {
		return meta, err
	}
	return meta, nil
}

// checkSums compares SHA256SUMS with the digests computed while reading.
func checkSums(text string, got map[string]string) error {
	listed := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		digest, name, ok := strings.Cut(line, "  ")
		if !ok {
			return invalid("SHA256SUMS line %q", line)
		}
		listed[name] = digest
	}
	for _, name := range []string{metaName, stateName} {
		switch want, ok := listed[name]; {
		case !ok:
			return invalid("SHA256SUMS lists no %s", name)
		case want != got[name]:
			return invalid("%s has SHA-256 %s, SHA256SUMS says %s", name, got[name], want)
		}
	}
	return nil
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// countingReader counts the bytes read, to say where a file is damaged.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
