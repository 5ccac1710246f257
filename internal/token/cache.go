package token

import (
	"hash/maphash"
	"strings"
	"sync"
)

// Bounds of the process-wide cache of short counts.
const (
	// CacheMaxLen is the longest text, in bytes, CountCached keeps; longer
	// texts are counted every time.
	CacheMaxLen = 256
	// cacheShards × cacheShardCap bounds the entries per tokenizer (16384,
	// at most ~5 MB with the longest keys).
	cacheShards   = 64
	cacheShardCap = 256
)

type cacheShard struct {
	mu sync.Mutex
	m  map[string]int32
}

// countCache maps short texts to their counts under one tokenizer. It is
// sharded by a hash of the text, each shard a map under its own mutex;
// a full shard forgets one arbitrary entry (map iteration starts at a random
// place) before it takes a new one, so it never grows past its cap.
type countCache struct {
	shards [cacheShards]cacheShard
}

var (
	cacheSeed = maphash.MakeSeed()
	caches    [2]countCache // by tokenizerIndex
)

// tokenizerIndex maps a supported tokenizer to its cache; -1 for others.
func tokenizerIndex(t Tokenizer) int {
	switch t {
	case O200kBase:
		return 0
	case Cl100kBase:
		return 1
	}
	return -1
}

func (c *countCache) shard(h uint64) *cacheShard { return &c.shards[h%cacheShards] }

// load looks up b; maphash.Bytes(seed, b) equals maphash.String(seed, string(b)).
func (c *countCache) load(h uint64, b []byte) (int, bool) {
	sh := c.shard(h)
	sh.mu.Lock()
	n, ok := sh.m[string(b)] // no allocation: the conversion is only a key
	sh.mu.Unlock()
	return int(n), ok
}

func (c *countCache) loadString(h uint64, s string) (int, bool) {
	sh := c.shard(h)
	sh.mu.Lock()
	n, ok := sh.m[s]
	sh.mu.Unlock()
	return int(n), ok
}

// store remembers n for s; owned says s is a fresh copy, else it is cloned so
// a substring key never keeps a long text alive.
func (c *countCache) store(h uint64, s string, n int, owned bool) {
	sh := c.shard(h)
	key := s
	if !owned {
		key = strings.Clone(s)
	}
	sh.mu.Lock()
	if sh.m == nil {
		sh.m = make(map[string]int32, cacheShardCap)
	}
	if _, ok := sh.m[key]; !ok && len(sh.m) >= cacheShardCap {
		for k := range sh.m {
			delete(sh.m, k)
			break
		}
	}
	sh.m[key] = int32(n)
	sh.mu.Unlock()
}

// CountCached returns Count(t, s), remembering the counts of texts of at
// most CacheMaxLen bytes in a bounded process-wide cache: headings and
// scaffolding lines repeat in every packet. Safe for concurrent use.
func CountCached(t Tokenizer, s string) (int, error) {
	ti := tokenizerIndex(t)
	if s == "" || len(s) > CacheMaxLen || ti < 0 {
		return Count(t, s)
	}
	c := &caches[ti]
	h := maphash.String(cacheSeed, s)
	if n, ok := c.loadString(h, s); ok {
		return n, nil
	}
	n, err := Count(t, s)
	if err != nil {
		return 0, err
	}
	c.store(h, s, n, false)
	return n, nil
}

// countCachedBytes is CountCached of string(b), allocating the string only
// on a miss: windows are assembled in a buffer.
func countCachedBytes(t Tokenizer, b []byte) (int, error) {
	ti := tokenizerIndex(t)
	if len(b) == 0 || len(b) > CacheMaxLen || ti < 0 {
		return Count(t, string(b))
	}
	c := &caches[ti]
	h := maphash.Bytes(cacheSeed, b)
	if n, ok := c.load(h, b); ok {
		return n, nil
	}
	s := string(b)
	n, err := Count(t, s)
	if err != nil {
		return 0, err
	}
	c.store(h, s, n, true)
	return n, nil
}
