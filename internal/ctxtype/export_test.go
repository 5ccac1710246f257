package ctxtype

// PgNumeric is pgNumeric, for the differential test against jsonb.
var PgNumeric = pgNumeric
