package assemble

import (
	"fmt"
	"strings"
	"time"

	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/navi"
)

// RuleContextPacket is the rule of a context packet's record: the request
// brought it.
const RuleContextPacket = "context_packet"

// ContextPacketKey is the key of the request's i-th context packet, in its
// record (subject request) and in the entry it renders as.
func ContextPacketKey(i int) string { return fmt.Sprintf("context_packets[%d]", i) }

// IsContextPacket reports whether key names one of the request's context
// packets: no item has such a key ("[" is outside the key alphabet).
func IsContextPacket(key string) bool { return strings.HasPrefix(key, "context_packets[") }

// contextPackets are the request's context packets (navi ContextPackets
// for this packet alone) as versions of the project's layer, mapped as an
// import maps them (navi.ToItem: kind knowledge, always on, navi's source
// and metadata kept under metadata.navi), with authority evidence. They
// rank among the items by priority; among themselves, at equal priority,
// in the request's order: each is dated a nanosecond before the one ahead
// of it, at the packet's time, which is also what makes them newer than
// any item. The packet service checked them with the same parser, so a
// packet that does not parse cannot reach here; it is left out if it does.
func (p *pipeline) contextPackets() []*ctxtype.Version {
	var out []*ctxtype.Version
	for i, raw := range p.req.ContextPackets {
		cp, err := navi.Parse(raw)
		if err != nil {
			continue
		}
		it := navi.ToItem(cp)
		out = append(out, &ctxtype.Version{
			Project: p.in.Project, Key: ContextPacketKey(i),
			Fields: ctxtype.Fields{
				Kind: it.Kind, Source: it.Source, Title: it.Title, Content: it.Content, Priority: int(it.Priority),
				Authority: "evidence", Confidence: "probable", Slot: "system", Trigger: ctxtype.Trigger{Always: true},
				Roles: ctxtype.Roles{VisibleTo: []string{}, HiddenFrom: []string{}}, Metadata: it.Metadata,
				Provenance: ctxtype.Provenance{DerivedFrom: []string{}},
			},
			CreatedAt: p.in.Now.Add(-time.Duration(i)),
		})
	}
	return out
}
