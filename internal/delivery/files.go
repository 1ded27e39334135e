package delivery

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
)

// devFrom is the sender of emails written to files; nobody receives them.
const devFrom = "payreq@localhost"

// fileSender is the development stand-in for the providers: it writes each
// message to <data dir>/outbox/<message id>.eml (a complete RFC 5322 message)
// or .txt, so a person can open the pay link. The file is named after the
// message id and replaced atomically, so a second delivery is harmless.
type fileSender struct {
	dir string
	log *slog.Logger
}

func newFileSender(dataDir string, log *slog.Logger) *fileSender {
	return &fileSender{dir: filepath.Join(dataDir, "outbox"), log: log}
}

func (f *fileSender) Send(_ context.Context, m Rendered) error {
	var buf bytes.Buffer
	name := m.ID.String()
	switch m.Channel {
	case ChannelEmail:
		msg, err := newEmail(m, devFrom)
		if err != nil {
			return err
		}
		if _, err := msg.WriteTo(&buf); err != nil {
			return fmt.Errorf("write email: %w", err)
		}
		name += ".eml"
	case ChannelText:
		fmt.Fprintf(&buf, "To: %s\nMessage-Id: %s\n\n%s\n", m.To, MessageID(m.ID), m.Text)
		name += ".txt"
	default:
		return fmt.Errorf("unknown channel %q", m.Channel)
	}
	path := filepath.Join(f.dir, name)
	if err := writeFileAtomic(path, buf.Bytes()); err != nil {
		return err
	}
	f.log.Info("message written to file", "invoice_id", m.InvoiceID.String(),
		"message_id", m.ID.String(), "file", path)
	return nil
}

// writeFileAtomic writes data to a temporary file beside path and renames it
// into place: a reader never sees half a message. The file is readable by its
// owner only, since the pay link in it is a secret.
func writeFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create outbox directory: %w", err)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("write outbox file: %w", err)
	}
	defer os.Remove(tmp.Name()) // after the rename there is nothing left to remove
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write outbox file: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("write outbox file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write outbox file: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write outbox file: %w", err)
	}
	return nil
}
