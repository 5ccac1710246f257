package audit

import "fmt"

// A Seal is the audit key's signature over the entries one transaction
// appended to a chain, kept at the last of them: it covers seqs First to
// that entry's seq, through the chain hash there. The chain's hashes can
// be recomputed by anyone who can write the database; a seal only by the
// holder of the audit key. A verifier that requires seals (RequireSeals)
// accepts a chain only when its seals tile it, each starting right after
// the one before and the last ending at the head, and each signature
// verifies: an entry added between two transactions has no seal, and an
// entry changed anywhere changes the chain hash every later seal signed.
type Seal struct {
	First     int64
	Kind      string // SealWrite or SealStart
	Signature []byte
}

// Kinds of seals: a transaction's, and the one that adopts the entries a
// chain had before it was sealed (only ever a chain's first seal).
const (
	SealWrite = "write"
	SealStart = "start"
)

// SealMessage is what a seal's signature covers: the UTF-8 bytes of
// "contextd-seal v1\n{kind}\n{chain}\n{first}\n{last}\n{chain hash hex}\n".
// Its first line keeps it apart from a checkpoint's, which the same key
// signs.
func SealMessage(kind, chain string, first, last int64, head []byte) []byte {
	return fmt.Appendf(nil, "contextd-seal v1\n%s\n%s\n%d\n%d\n%s\n", kind, chain, first, last, HexHead(head))
}

// SealCheck verifies a seal's signature over its message.
type SealCheck func(msg, signature []byte) bool

// RequireSeals makes the verifier accept only entries covered by seals of
// chain that check verifies. Without it (a deployment without an audit
// key), seals are not looked at.
func (v *Verifier) RequireSeals(chain string, check SealCheck) *Verifier {
	v.chain, v.checkSeal = chain, check
	return v
}

// Adopted is the last seq of the entries a start seal adopted (0: none):
// entries written before the chain was sealed, proven by the checkpoints
// taken of them rather than by seals of their own.
func (v *Verifier) Adopted() int64 { return v.adopted }

// seal checks the seal at the entry just checked (e, now v.seq). A seal
// problem is kept aside and reported by SealedToEnd, after every other
// check ran: a caller that proves some entries another way (a checkpoint)
// still gets the rows checked.
func (v *Verifier) seal(e Entry) {
	s := e.Seal
	defer func() { v.sealed, v.seals = e.Seq, v.seals+1 }()
	switch {
	case s.Kind != SealWrite && s.Kind != SealStart:
		v.sealFail(e.Seq, "the seal at seq %d is of an unknown kind %q", e.Seq, s.Kind)
		return
	case s.Kind == SealStart && (s.First != 1 || v.seals > 0):
		v.sealFail(e.Seq, "a start seal at seq %d is not the chain's first seal from seq 1", e.Seq)
		return
	case s.Kind == SealWrite && s.First <= v.sealed:
		v.sealFail(e.Seq, "the seal at seq %d claims seqs from %d, which what comes before it covers", e.Seq, s.First)
		return
	case s.Kind == SealWrite && s.First > v.sealed+1:
		v.sealFail(v.sealed+1, "seqs %d to %d have no seal of the audit key: no write of the key holder made them (entries written while no key was configured are sealed by `contextd audit adopt`, once checked)", v.sealed+1, s.First-1)
	}
	if !v.checkSeal(SealMessage(s.Kind, v.chain, s.First, e.Seq, v.prev), s.Signature) {
		v.sealFail(s.First, "the seal of seqs %d to %d does not verify with the audit key: the chain up to seq %d is not what the key holder wrote", s.First, e.Seq, e.Seq)
		return
	}
	if s.Kind == SealStart {
		v.adopted = e.Seq
	}
}

func (v *Verifier) sealFail(seq int64, format string, args ...any) {
	if v.sealProblem == nil {
		v.sealProblem = &Problem{Seq: seq, Code: Unsealed, Detail: fmt.Sprintf(format, args...)}
	}
}

// Trust takes the entries up to seq, just checked, as proven by a
// checkpoint of the audit key whose head they lead to: seals are required
// after it (entries written before the deployment had a key have none). A
// seal problem found before it is forgotten: the checkpoint proves those
// entries.
func (v *Verifier) Trust(seq int64) {
	if seq != v.seq {
		return
	}
	if v.sealProblem != nil && v.sealProblem.Seq <= seq {
		v.sealProblem = nil
	}
	if seq > v.sealed {
		v.sealed = seq
	}
}

// SealedToEnd checks, after every other check (a more precise problem,
// such as a row without its entry, comes first), that seals of the audit
// key cover the chain to its last entry, each right after the one before,
// and verify: the first problem with them is "unsealed".
func (v *Verifier) SealedToEnd() bool {
	if v.problem != nil {
		return false
	}
	if v.checkSeal == nil {
		return true
	}
	if v.sealed < v.seq {
		v.sealFail(v.sealed+1, "seqs %d to %d have no seal of the audit key: no write of the key holder made them (entries written while no key was configured are sealed by `contextd audit adopt`, once checked)", v.sealed+1, v.seq)
	}
	if v.sealProblem != nil {
		v.problem = v.sealProblem
		return false
	}
	return true
}
