package store

// Scan is one kind of read of a run that no index answered: the reads of one table filtered on
// the same fields, which walked the table's rows instead. An equality or $ieq on the key or on a
// field the table declares in its indexes (domain.json) is answered without a walk; so a scan
// with many rows examined tells a domain author which index to declare (ranges, $contains and
// the like always walk, over the rows the key range leaves).
type Scan struct {
	Table  string   `json:"table"`
	Fields []string `json:"fields"` // the filter's fields, sorted
	Calls  int      `json:"calls"`
	Rows   int64    `json:"rows_examined"` // committed rows the walks looked at
}

// MaxScans bounds the distinct scans a run reports; later kinds are not recorded.
const MaxScans = 16
