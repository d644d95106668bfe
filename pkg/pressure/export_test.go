// SPDX-License-Identifier: Apache-2.0

package pressure

// For the tests of package pressure_test, which rank what the observer sees
// with pkg/rank (which imports this package).

// CRIOHostRoot is crioHostRoot: a CRI-O node's host root, its graph root at
// CRIOStore.
var CRIOHostRoot = crioHostRoot

// CRIOStore is the CRI-O node's graph root; CRIOWriterLayer the upper
// directory of the writer pod's container, under it; CRIOWriterUID and
// CRIOWebUID the two pods with writable layers.
const (
	CRIOStore       = crioStore
	CRIOWriterLayer = "overlay/" + crioWriterLayer + "/diff"
	CRIOWriterUID   = uidBE
	CRIOWebUID      = uidB
)
