package evidence

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/contextd/contextd/internal/audit"
	"github.com/contextd/contextd/internal/secretfile"
)

// Keys are a deployment's audit secret, kept outside the database: the
// ed25519 key that signs checkpoints and, derived from it, the HMAC key of
// stored idempotency answers. Every process of a deployment has the same.
type Keys struct {
	sign ed25519.PrivateKey
	mac  []byte
}

// ParseKey reads a key as its file holds it: the standard base64 of the
// 32-byte ed25519 seed.
func ParseKey(text string) (*Keys, error) {
	seed, err := base64.StdEncoding.DecodeString(strings.TrimSpace(text))
	if err != nil || len(seed) != ed25519.SeedSize {
		return nil, errors.New("an audit key is the base64 of 32 bytes")
	}
	m := hmac.New(sha256.New, seed)
	m.Write([]byte("contextd idempotency answers v1"))
	return &Keys{sign: ed25519.NewKeyFromSeed(seed), mac: m.Sum(nil)}, nil
}

// LoadKeyFile reads a key file, which only its owner may open (mode 0600
// or stricter; see package secretfile).
func LoadKeyFile(path string) (*Keys, error) {
	b, err := secretfile.Read("audit key", path)
	if err != nil {
		return nil, err
	}
	k, err := ParseKey(string(b))
	if err != nil {
		return nil, fmt.Errorf("audit key %s: %w", path, err)
	}
	return k, nil
}

// EnsureKeyFile loads the key file at path, generating it (mode 0600)
// when there is none: for the embedded default's data directory only.
func EnsureKeyFile(path string) (*Keys, bool, error) {
	k, err := LoadKeyFile(path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return k, false, err
	}
	seed := make([]byte, ed25519.SeedSize)
	if _, err := rand.Read(seed); err != nil {
		return nil, false, err
	}
	text := base64.StdEncoding.EncodeToString(seed) + "\n"
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, false, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, fs.ErrExist) { // another process made it first
			k, err := LoadKeyFile(path)
			return k, false, err
		}
		return nil, false, fmt.Errorf("audit key: %w", err)
	}
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		return nil, false, fmt.Errorf("audit key: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, false, fmt.Errorf("audit key: %w", err)
	}
	k, err = ParseKey(text)
	return k, true, err
}

// PublicKey is the checkpoints' public key.
func (k *Keys) PublicKey() ed25519.PublicKey { return k.sign.Public().(ed25519.PublicKey) }

// Seal signs a seal's message (audit.SealMessage): what proves that the
// holder of this key wrote a transaction's entries.
func (k *Keys) Seal(msg []byte) []byte { return ed25519.Sign(k.sign, msg) }

// SealCheck verifies seals with a deployment's public key: what anyone
// holding only that key can check.
func SealCheck(pub ed25519.PublicKey) audit.SealCheck {
	return func(msg, sig []byte) bool { return len(sig) == ed25519.SignatureSize && ed25519.Verify(pub, msg, sig) }
}

// MAC is the HMAC-SHA256 of a stored answer's canonical bytes.
func (k *Keys) MAC(msg []byte) []byte {
	m := hmac.New(sha256.New, k.mac)
	m.Write(msg)
	return m.Sum(nil)
}

// Checkpoint is a signed statement of a chain's head at a time.
type Checkpoint struct {
	Project   string `json:"project"`
	Seq       int64  `json:"seq"`
	Head      string `json:"head"`
	Time      string `json:"time"`
	Signature string `json:"signature"`
	PublicKey string `json:"public_key"`
}

// CheckpointMessage is what a checkpoint's signature covers: the UTF-8
// bytes of "contextd-checkpoint v1\n{project}\n{seq}\n{head hex}\n{time}\n".
func CheckpointMessage(project string, seq int64, head, at string) []byte {
	return fmt.Appendf(nil, "contextd-checkpoint v1\n%s\n%d\n%s\n%s\n", project, seq, head, at)
}

// Sign makes the checkpoint of a head.
func (k *Keys) Sign(project string, seq int64, head []byte, at time.Time) Checkpoint {
	c := Checkpoint{Project: project, Seq: seq, Head: audit.HexHead(head), Time: at.UTC().Format(time.RFC3339),
		PublicKey: base64.StdEncoding.EncodeToString(k.PublicKey())}
	c.Signature = base64.StdEncoding.EncodeToString(ed25519.Sign(k.sign, CheckpointMessage(c.Project, c.Seq, c.Head, c.Time)))
	return c
}

// ParsePublicKey reads a public key as checkpoints show it: the standard
// base64 of its 32 bytes.
func ParsePublicKey(text string) (ed25519.PublicKey, error) {
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(text))
	if err != nil || len(b) != ed25519.PublicKeySize {
		return nil, errors.New("not the base64 of an ed25519 public key (32 bytes)")
	}
	return ed25519.PublicKey(b), nil
}

// VerifySignature checks a checkpoint's signature with its own public key,
// or with want when given (the deployment's known key).
func (c Checkpoint) VerifySignature(want ed25519.PublicKey) error {
	pub, err := ParsePublicKey(c.PublicKey)
	if err != nil {
		return errors.New("checkpoint: public_key is not a base64 ed25519 key")
	}
	if want != nil && !want.Equal(pub) {
		return errors.New("checkpoint: signed by another key than the deployment's")
	}
	sig, err := base64.StdEncoding.DecodeString(c.Signature)
	if err != nil || !ed25519.Verify(pub, CheckpointMessage(c.Project, c.Seq, c.Head, c.Time), sig) {
		return errors.New("checkpoint: the signature does not verify")
	}
	return nil
}
