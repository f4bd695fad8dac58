package contracts

// Diagnostic codes of the output contract. They are stable: tools and tests match on them.
const (
	CodeAnswerMissing     = "answer-missing"      // answer_text was never set
	CodeAnswerType        = "answer-type"         // answer_text is not a string
	CodeAnswerEmpty       = "answer-empty"        // answer_text is empty after trimming spaces
	CodeAnswerTooLong     = "answer-too-long"     // more characters than the contract allows
	CodeAnswerSentences   = "answer-sentences"    // more sentences than the contract allows
	CodeAnswerNotCustomer = "answer-not-customer" // a data dump, a traceback or several lines
	CodeAnswerControl     = "answer-control-char" // a control or bidi character, not a line break
	CodeStatusMissing     = "status-missing"      // STATUS was never set
	CodeStatusType        = "status-type"         // STATUS is not a string
	CodeStatusInvalid     = "status-invalid"      // STATUS is not one of the allowed values
	CodeWritesNotAllowed  = "writes-not-allowed"  // changes staged under a STATUS that may not write
	CodeChangeMissing     = "change-missing"      // a STATUS that requires a change, and nothing staged
	CodeChangeUnexpected  = "change-unexpected"   // a STATUS that says nothing changed, and changes staged
)

// Diagnostic codes of the policy rule kinds (the kind that reports each is in brackets).
const (
	CodeTableNotAllowed  = "table-not-allowed"  // [only_tables] a change to a table not listed
	CodeDeleteNotAllowed = "delete-not-allowed" // [no_deletes] a removed row
	CodeInsertNotAllowed = "insert-not-allowed" // [no_inserts] a new row in a table that takes none
	CodeAppendOnly       = "append-only"        // [append_only] an existing row changed or removed
	CodeKeyChanged       = "key-changed"        // [key_immutable] a row's key field changed
	CodeFieldImmutable   = "field-immutable"    // [mutable_fields] a field that may not change did
	CodeNegativeValue    = "negative-value"     // [non_negative] a number went below zero
	CodeLedgerMissing    = "ledger-missing"     // [ledger_per_item] an item changed without its entry
	CodeLedgerUnmatched  = "ledger-unmatched"   // [ledger_per_item] an entry that pays for no item
	CodeLedgerWholeOrder = "ledger-whole-order" // [ledger_per_item] one entry for several items
	CodeLedgerPerUnit    = "ledger-per-unit"    // [ledger_per_item] one entry per unit of an item
	CodeLedgerSign       = "ledger-sign"        // [ledger_per_item] the amount has the wrong sign
	CodeLedgerAmount     = "ledger-amount"      // [ledger_per_item] the amount is not price × units
	CodeBalanceChain     = "balance-chain"      // [balance_chain] a balance is not previous + amount
	CodeLedgerOrder      = "ledger-order"       // [balance_chain] a new entry sorts before a committed one
	CodeBalanceNegative  = "balance-negative"   // [non_negative_balance] the running balance went below 0
)
