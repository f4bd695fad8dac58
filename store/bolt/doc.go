// Package bolt is starplan's embedded store: the store.Store of one domain kept in a single bbolt
// file that is also a clover v2 database. See the store package for what every backend owes.
package bolt
