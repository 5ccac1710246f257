package assemble

import "github.com/contextd/contextd/internal/ctxtype"

// DecodeRequest reads a request, from a client or stored with a packet; see
// ctxtype.DecodeRequest. It stays here so a caller that assembles needs one
// import.
func DecodeRequest(raw []byte) (*ctxtype.Request, error) { return ctxtype.DecodeRequest(raw) }
