package assemble

// The pipeline versions. A packet stores the version that made it, and a
// replay renders with that version's code, so a packet made before a
// change of the bytes still replays byte for byte.
const (
	// Pipeline1 reads every plausible candidate, tries every one against
	// the budget and ranks relevance with ts_rank_cd (Assemble).
	Pipeline1 = 1
	// Pipeline2 reads candidates in rank order from a Source, stops trying
	// TryAfterMiss candidates after the first that does not fit, and ranks
	// relevance with TopRelevance (AssembleBounded).
	Pipeline2 = 2
	// Current is the pipeline new packets are made by.
	Current = Pipeline2
)

// The versions of the text layout, which a packet stores beside its
// pipeline (a replay writes the layout it was rendered with).
const (
	// Render1 names only the keys in a contradiction line.
	Render1 = 1
	// Render2 names the facts in a contradiction line (the winner's and
	// the loser's content, cut at 120 characters), as KXM prints the
	// losing fact, and the loser's record carries the line's tokens.
	Render2 = 2
	// Render3 makes a pin that names no item the role may see a gap of
	// the packet (GapPinUnresolved), and the kxm format's unresolvedGaps
	// name what they count: each unresolved pin, and the entries the budget
	// left out by layer, key and version (the first MaxGaps of them, as
	// many as the budget holds, then how many more), so a kxm document
	// says what it lacks without the packet's answer around it.
	Render3 = 3
	// CurrentRender is the layout new packets are rendered with.
	CurrentRender = Render3
)
