package packet

import "github.com/contextd/contextd/internal/page"

// packetsListing and injectionsListing name the listings a cursor belongs
// to: a project's packets; the packets of project of that used an item
// (its project and key), so a cursor of another item's or project's
// listing is refused, not read as a position in this one.
func packetsListing(proj string) string { return page.Listing("packets", proj) }
func injectionsListing(of, proj, key string) string {
	return page.Listing("injections", of, proj, key)
}
