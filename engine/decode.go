package engine

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/starplan/starplan/table"
)

// decodeRecord reads an audit record back with the kinds its rows had: JSON has one number type,
// but rows hold int64 for int fields and float64 for float fields, and the diff of a record must
// read as the run's did ("6 → 3", not "6.0 → 3.0").
func (e *Engine) decodeRecord(raw []byte) (*RunRecord, error) {
	s, err := decodeStored(raw)
	if err != nil {
		return nil, err
	}
	r := &s.RunRecord
	for name, tc := range r.Changes {
		s, _ := e.st.Schema(name)
		tc.Inserted = typedRows(s, tc.Inserted)
		tc.Deleted = typedRows(s, tc.Deleted)
		for i := range tc.Updated {
			u := &tc.Updated[i]
			u.Key = plainNumbers(u.Key)
			u.Before, u.After = typedRow(s, u.Before), typedRow(s, u.After)
		}
	}
	if p := s.writes(); p != nil {
		for i := range p.Writes {
			w := &p.Writes[i]
			s, _ := e.st.Schema(w.Table)
			w.Key = plainNumbers(w.Key)
			w.Before, w.Row = typedRow(s, w.Before), typedRow(s, w.Row)
		}
		for i := range p.Reads {
			p.Reads[i].Key = plainNumbers(p.Reads[i].Key)
		}
	}
	return s.restore()
}

// decodeStored reads a stored audit record, numbers as json.Number, in either form (auditcodec.go).
func decodeStored(raw []byte) (*storedRecord, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var s storedRecord
	if err := dec.Decode(&s); err != nil {
		return nil, err
	}
	if s.ID == "" { // written before run_id was the one name of a run's id
		var old struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(raw, &old); err != nil {
			return nil, err
		}
		s.ID = old.ID
	}
	return &s, nil
}

func typedRows(s *table.Schema, rows []table.Row) []table.Row {
	for i, row := range rows {
		rows[i] = typedRow(s, row)
	}
	return rows
}

// typedRow converts a decoded row's numbers to the kinds of the schema's fields.
func typedRow(s *table.Schema, row table.Row) table.Row {
	for k, v := range row {
		v = plainNumbers(v)
		if s != nil {
			if f := s.Field(k); f != nil && (f.Type == table.TypeFloat || f.Nested()) {
				v = table.RestoreKinds(f, v)
			}
		}
		row[k] = v
	}
	return row
}

// plainNumbers replaces json.Number values, also nested ones, by int64 when the literal is an
// integer and float64 otherwise.
func plainNumbers(v any) any {
	switch v := v.(type) {
	case json.Number:
		if i, err := strconv.ParseInt(string(v), 10, 64); err == nil {
			return i
		}
		f, _ := v.Float64()
		return f
	case []any:
		for i, x := range v {
			v[i] = plainNumbers(x)
		}
	case map[string]any:
		for k, x := range v {
			v[k] = plainNumbers(x)
		}
	}
	return v
}
