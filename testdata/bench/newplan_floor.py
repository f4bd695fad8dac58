"""CPython's floor for a new plan: a bare compile() + exec() of the plan's text over rows already
in memory, with the helpers as plain Python functions (no checks, no limits, no staging, no
record). engine's BenchmarkNewPlan drives it as a paired measurement:

    stdin, first line:  {"inventory": [...], "transactions": [...]}   (the store's rows)
    stdin, each line:   the plan's text as a JSON string (a new text every time)
    stdout, each line:  ns the compile() + exec() took, or "error: ..." if the plan failed

Each run starts from the same rows: the writes go to a per-run overlay, as a dry run's do.
"""
import json
import sys
import time


def main():
    data = json.loads(sys.stdin.readline())
    inventory = data["inventory"]
    transactions = data["transactions"]

    class Table:
        def __init__(self, rows, key):
            self.rows, self.key = rows, key
            self.updates, self.inserts = {}, []

        def get(self, where):
            (field, cond), = where.items()
            want = cond["$ieq"].lower()
            for r in self.rows:
                r = self.updates.get(r[self.key], r)
                if r[field].lower() == want:
                    return dict(r)
            return None

        def update(self, fields, where):
            k = where[self.key]
            for r in self.rows:
                if r[self.key] == k:
                    new = dict(self.updates.get(k, r))
                    new.update(fields)
                    self.updates[k] = new
                    return 1
            return 0

        def insert(self, row):
            self.inserts.append(row)
            return row[self.key]

    def next_transaction_id(tbl):
        n = max(int(r["transaction_id"][3:]) for r in tbl.rows + tbl.inserts)
        return "TXN%03d" % (n + 1)

    def get_current_balance(tbl):
        rows = tbl.rows + tbl.inserts
        return rows[-1]["balance_after_transaction"]

    def now():
        return "2026-11-21T10:30:00Z"

    out = sys.stdout
    for line in sys.stdin:
        text = json.loads(line)
        inv = Table(inventory, "item_id")
        txn = Table(transactions, "transaction_id")
        env = {"inventory_tbl": inv, "transactions_tbl": txn, "next_transaction_id": next_transaction_id,
               "get_current_balance": get_current_balance, "now": now,
               "user_request": "I want to buy 3 pairs of classic sunglasses and 1 pair of aviator sunglasses."}
        start = time.perf_counter_ns()
        try:
            exec(compile(text, "plan.py", "exec"), env)
            result = (env["STATUS"], env["answer_text"])
        except Exception as e:  # the benchmark fails on it
            out.write("error: %r\n" % e)
            out.flush()
            continue
        elapsed = time.perf_counter_ns() - start
        if result[0] != "success":
            out.write("error: STATUS %s\n" % result[0])
        else:
            out.write("%d\n" % elapsed)
        out.flush()


if __name__ == "__main__":
    main()
