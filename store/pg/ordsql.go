package pg

import (
	"fmt"

	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/table"
)

// The _ord column: a key's natural-order encoding (store.AppendKey), so that the database orders
// rows as table.CompareKeys does ("TXN9" < "TXN10"), which no SQL collation does; bytea compares
// bytes, so ORDER BY _ord is natural order and a range of keys is a range of _ord, answered by
// its index.
//
// The _ord of a row another program writes: a trigger computes it, in SQL, as ordKey does in
// Go, when an INSERT leaves it NULL or an UPDATE changes the key. starplan's own writes set it,
// so for them the trigger only looks.
const (
	ordFunc     = "_starplan_ord"      // the trigger function
	ordTextFunc = "_starplan_ord_text" // a text key's encoding
	ordUintFunc = "_starplan_ord_uint" // store.AppendOrderedUint
	ordNotFunc  = "_starplan_ord_not"  // every byte inverted
)

// ordKey returns the _ord of a table key (a string or an int64).
func ordKey(key any) []byte { return store.AppendKey(nil, key) }

// ordFunctionsSQL are the CREATE FUNCTIONs of the _ord encoding in schema.
func ordFunctionsSQL(schema string) []string {
	f := func(name string) string { return ident(schema, name) }
	return []string{
		fmt.Sprintf(`CREATE FUNCTION %s(v bigint) RETURNS bytea LANGUAGE plpgsql IMMUTABLE AS $f$
DECLARE
	h text;
BEGIN
	IF v <= 247 THEN
		RETURN decode(lpad(to_hex(v), 2, '0'), 'hex');
	END IF;
	h := to_hex(v);
	IF length(h) %% 2 = 1 THEN
		h := '0' || h;
	END IF;
	RETURN decode(to_hex(247 + length(h) / 2), 'hex') || decode(h, 'hex');
END $f$`, f(ordUintFunc)),
		fmt.Sprintf(`CREATE FUNCTION %s(b bytea) RETURNS bytea LANGUAGE plpgsql IMMUTABLE AS $f$
BEGIN
	FOR k IN 0 .. length(b) - 1 LOOP
		b := set_byte(b, k, 255 - get_byte(b, k));
	END LOOP;
	RETURN b;
END $f$`, f(ordNotFunc)),
		fmt.Sprintf(`CREATE FUNCTION %s(k text) RETURNS bytea LANGUAGE plpgsql IMMUTABLE AS $f$
DECLARE
	s bytea := convert_to(k, 'UTF8');
	n int := length(s);
	i int := 0;
	j int;
	sig int;
	c int;
	nat bytea := ''::bytea;
	tie bytea := ''::bytea;
	part bytea;
BEGIN
	WHILE i < n LOOP
		c := get_byte(s, i);
		IF c < 48 OR c > 57 THEN
			nat := nat || substring(s from i + 1 for 1);
			i := i + 1;
		ELSE
			j := i;
			WHILE j < n AND get_byte(s, j) BETWEEN 48 AND 57 LOOP
				j := j + 1;
			END LOOP;
			sig := i;
			WHILE sig < j - 1 AND get_byte(s, sig) = 48 LOOP
				sig := sig + 1;
			END LOOP;
			nat := nat || '\x30'::bytea || %[2]s(j - sig) || substring(s from sig + 1 for j - sig);
			part := %[2]s(sig - i);
			IF get_byte(s, sig) <> 48 OR (j < n AND get_byte(s, j) > 57) THEN
				part := %[3]s(part);
			END IF;
			tie := tie || part;
			i := j;
		END IF;
	END LOOP;
	RETURN nat || '\x0001'::bytea || tie;
END $f$`, f(ordTextFunc), f(ordUintFunc), f(ordNotFunc)),
		// TG_ARGV: the key column, and "int" or "text".
		fmt.Sprintf(`CREATE FUNCTION %s() RETURNS trigger LANGUAGE plpgsql AS $f$
DECLARE
	k text;
BEGIN
	IF TG_OP = 'INSERT' AND NEW._ord IS NOT NULL THEN
		RETURN NEW;
	END IF;
	k := to_jsonb(NEW) ->> TG_ARGV[0];
	IF TG_OP = 'UPDATE' AND k IS NOT DISTINCT FROM (to_jsonb(OLD) ->> TG_ARGV[0]) AND NEW._ord IS NOT NULL THEN
		RETURN NEW;
	END IF;
	IF TG_ARGV[1] = 'int' THEN
		NEW._ord := int8send(k::bigint # (-9223372036854775807 - 1));
	ELSE
		NEW._ord := %s(k);
	END IF;
	RETURN NEW;
END $f$`, f(ordFunc), f(ordTextFunc)),
	}
}

// ordTriggerSQL is the CREATE TRIGGER that keeps sc's _ord.
func ordTriggerSQL(schema string, sc *store.Schema) string {
	kind := "text"
	if sc.KeyField.Type == table.TypeInt {
		kind = "int"
	}
	t := newSQLTable(schema, sc)
	col := sc.SQL.Column(sc.Key)
	return fmt.Sprintf("CREATE TRIGGER _starplan_ord BEFORE INSERT OR UPDATE OF %s ON %s FOR EACH ROW EXECUTE FUNCTION %s(%s, %s)",
		q(col), t.name, ident(schema, ordFunc), literal(col), literal(kind))
}
