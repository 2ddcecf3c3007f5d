package ab

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
)

// Role is what an artifact is to the build: ours or the reference. Roles are never shown
// to a judge; only the slot labels A and B are.
type Role string

const (
	// Ours is the artifact the build produced.
	Ours Role = "ours"
	// Reference is the artifact the acceptance criterion points at.
	Reference Role = "reference"
)

// Slot labels and the tie answer as a judge writes them. They are the only values a
// raw_winner may take (see RawVerdict.Validate for the accepted spellings).
const (
	// LabelA is the first slot.
	LabelA = "A"
	// LabelB is the second slot.
	LabelB = "B"
	// RawTie is the canonical spelling of a tie in a raw verdict.
	RawTie = "tie"
)

// Assignment records which role sits in slot A and which in slot B. Its JSON form,
// {"A":"ours","B":"reference"}, is the manifest's label_assignment.
type Assignment struct {
	A Role `json:"A"`
	B Role `json:"B"`
}

// Assign returns the slot assignment for an AC at an iteration.
//
// It must agree bit for bit with the reference shell helper, because the point of
// recording label_assignment is that a reviewer can re-run that helper and compare. The
// helper pipes `echo "$ac|$iter"` into sha256sum, so the hashed bytes end in a newline;
// it then reads the first 8 hex digits of the digest as an unsigned 32-bit number and
// takes it mod 2: 0 puts ours in A, 1 puts the reference in A. Those 8 hex digits are the
// first 4 digest bytes, big-endian, which is what is decoded below.
//
// The iteration is written in decimal as the shell would print it, so a negative value
// hashes as "-1"; callers normally pass 0 and up. Changing the iteration is how a re-run
// of the same AC gets a fresh, still reproducible, assignment.
func Assign(acID string, iteration int) Assignment {
	sum := sha256.Sum256([]byte(acID + "|" + strconv.Itoa(iteration) + "\n"))
	if binary.BigEndian.Uint32(sum[:4])%2 == 0 {
		return Assignment{A: Ours, B: Reference}
	}
	return Assignment{A: Reference, B: Ours}
}

// String renders the assignment in the helper's output form, "A=ours,B=reference".
func (a Assignment) String() string {
	return "A=" + string(a.A) + ",B=" + string(a.B)
}

// Legend says, for a reviewer after un-blinding, which artifact each slot was: "slot A
// was ours, slot B the reference". It goes next to a judge's own words ("Slot A lacks
// ..."), which are recorded unchanged. An invalid assignment has no legend.
func (a Assignment) Legend() string {
	if !a.Valid() {
		return ""
	}
	name := func(r Role) string {
		if r == Reference {
			return "the reference"
		}
		return string(r)
	}
	return "slot A was " + name(a.A) + ", slot B " + name(a.B)
}

// Valid reports whether the assignment puts ours in one slot and the reference in the
// other. Anything else (both slots the same role, an unknown role, the zero value) cannot
// be un-shuffled and must not be trusted.
func (a Assignment) Valid() bool {
	return (a.A == Ours && a.B == Reference) || (a.A == Reference && a.B == Ours)
}

// Swapped returns the assignment with the slots exchanged: what the second call of a
// position-swap pair is judged under.
func (a Assignment) Swapped() Assignment {
	return Assignment{A: a.B, B: a.A}
}

// Slots returns the artifact paths in slot order (the one for A first). The phase that
// builds the blinded prompt needs exactly this and nothing more.
func (a Assignment) Slots(p Pair) (slotA, slotB string) {
	if a.A == Reference {
		return p.Reference, p.Ours
	}
	return p.Ours, p.Reference
}

// Label is the inverse of Unshuffle: the raw answer ("A", "B" or "tie") that means w
// under this assignment. It is used to write a raw_winner consistent with the recorded
// label_assignment when the winner came from a swap pair or a panel rather than from one
// answer. It returns "" for an invalid winner or assignment.
func (a Assignment) Label(w Winner) string {
	if !a.Valid() {
		return ""
	}
	switch w {
	case WinnerTie:
		return RawTie
	case WinnerOurs, WinnerReference:
		if Role(w) == a.A {
			return LabelA
		}
		return LabelB
	}
	return ""
}

// ParseAssignment parses the helper's form, "A=ours,B=reference" or
// "A=reference,B=ours". Surrounding whitespace is ignored because the helper's output is
// usually captured with its trailing newline; anything else must match exactly, since a
// label assignment that is "almost" right is not an audit trail.
func ParseAssignment(s string) (Assignment, error) {
	switch strings.TrimSpace(s) {
	case "A=ours,B=reference":
		return Assignment{A: Ours, B: Reference}, nil
	case "A=reference,B=ours":
		return Assignment{A: Reference, B: Ours}, nil
	}
	return Assignment{}, fmt.Errorf("ab: invalid label assignment %q: want A=ours,B=reference or A=reference,B=ours", s)
}

// Winner is a verdict after un-shuffling: which role won, or a tie.
type Winner string

const (
	// WinnerOurs means the build's artifact was judged better.
	WinnerOurs Winner = "ours"
	// WinnerReference means the reference artifact was judged better.
	WinnerReference Winner = "reference"
	// WinnerTie means neither was judged better.
	WinnerTie Winner = "tie"
)

// Valid reports whether w is one of ours, reference or tie.
func (w Winner) Valid() bool {
	return w == WinnerOurs || w == WinnerReference || w == WinnerTie
}

// Unshuffle maps a judge's raw pick back to a role. "A" and "B" become whichever role
// the assignment put in that slot; a tie stays a tie. The raw value is matched with the
// same spellings RawVerdict.Validate accepts. An unacceptable raw value or an invalid
// assignment yields the empty Winner, which is not Valid: validate first, and treat an
// empty result as a schema violation rather than guessing.
func Unshuffle(rawWinner string, a Assignment) Winner {
	if !a.Valid() {
		return ""
	}
	raw, ok := canonicalRawWinner(rawWinner)
	if !ok {
		return ""
	}
	switch raw {
	case LabelA:
		return Winner(a.A)
	case LabelB:
		return Winner(a.B)
	}
	return WinnerTie
}
