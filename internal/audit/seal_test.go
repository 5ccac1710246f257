package audit

import (
	"crypto/ed25519"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// chainOf is a chain of project-kind entries (mutable, so no row needs
// checking), sealed by key at the end of each transaction of txs entries.
func chainOf(key ed25519.PrivateKey, txs ...int) []Entry {
	var es []Entry
	prev := Genesis
	for _, n := range txs {
		first := int64(len(es)) + 1
		for range n {
			body := fmt.Appendf(nil, `{"entry":"project","n":%d}`, len(es))
			e := Entry{Seq: int64(len(es)) + 1, Kind: KindProject, Subject: "acme", Body: body, EntryHash: Hash(body)}
			e.ChainHash = Link(prev, e.EntryHash)
			prev = e.ChainHash
			es = append(es, e)
		}
		last := &es[len(es)-1]
		last.Seal = &Seal{First: first, Kind: SealWrite, Signature: ed25519.Sign(key, SealMessage(SealWrite, "acme", first, last.Seq, last.ChainHash))}
	}
	return es
}

func verifySealed(pub ed25519.PublicKey, es []Entry, trust int64) *Problem {
	v := NewVerifier().RequireSeals("acme", func(msg, sig []byte) bool { return ed25519.Verify(pub, msg, sig) })
	for _, e := range es {
		if !v.Entry(e, e.Body) {
			return v.Problem()
		}
		if e.Seq == trust {
			v.Trust(e.Seq)
		}
	}
	if !v.AtHead(v.Entries(), v.Head()) || !v.SealedToEnd() {
		return v.Problem()
	}
	return nil
}

// TestSealsMustTileTheChain: a chain verifies under RequireSeals only when
// every entry is covered by a seal of the key, the seals following each
// other without a gap up to the last entry.
func TestSealsMustTileTheChain(t *testing.T) {
	pub, key, _ := ed25519.GenerateKey(nil)
	_, other, _ := ed25519.GenerateKey(nil)
	require.Nil(t, verifySealed(pub, chainOf(key, 2, 1, 3), 0))

	// Entries appended after the last seal (a forger's), with their hashes
	// right: unsealed.
	es := chainOf(key, 2, 1)
	forged := chainOf(other, 2, 1, 1)[3]
	forged.Seal = nil
	es = append(es, forged)
	p := verifySealed(pub, es, 0)
	require.NotNil(t, p)
	require.Equal(t, Unsealed, p.Code)
	require.Equal(t, int64(4), p.Seq)

	// A genuine seal after them does not cover them: its first is its own.
	es = chainOf(key, 2, 1, 1, 2)
	es[3].Seal = nil
	p = verifySealed(pub, es, 0)
	require.Equal(t, Unsealed, p.Code)
	require.Equal(t, int64(4), p.Seq)

	// A seal by another key, or over another chain hash, does not verify.
	es = chainOf(other, 2, 1)
	p = verifySealed(pub, es, 0)
	require.Equal(t, Unsealed, p.Code)
	require.Equal(t, int64(1), p.Seq)
	es = chainOf(key, 2, 1)
	es[2].Seal.First = 2 // claims to cover what the first seal covered
	p = verifySealed(pub, es, 0)
	require.Equal(t, Unsealed, p.Code)

	// A start seal is only ever the first.
	es = chainOf(key, 2, 1)
	es[2].Seal = &Seal{First: 3, Kind: SealStart, Signature: ed25519.Sign(key, SealMessage(SealStart, "acme", 3, 3, es[2].ChainHash))}
	p = verifySealed(pub, es, 0)
	require.Equal(t, Unsealed, p.Code)

	// Entries before a checkpoint the caller trusts need no seal; after
	// it they do.
	es = chainOf(key, 2, 1, 1)
	es[1].Seal, es[2].Seal = nil, nil
	require.NotNil(t, verifySealed(pub, es, 0))
	require.Nil(t, verifySealed(pub, es, 3))
	require.NotNil(t, verifySealed(pub, es, 2), "seq 3 is after the checkpoint and unsealed")

	// Without RequireSeals nothing is asked of them.
	v := NewVerifier()
	for _, e := range es {
		require.True(t, v.Entry(e, e.Body))
	}
	require.True(t, v.SealedToEnd())
}
