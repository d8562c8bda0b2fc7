// Package alloctest is the allocation model the replica tests check their
// recorded histories against with porcupine (a linearizability checker):
// composes that took blocks and decomposes that freed them, as clients saw
// them acknowledged. Tests only import it.
package alloctest

import (
	"fmt"
	"maps"
	"slices"

	"github.com/anishathalye/porcupine"
)

// Op is one operation of a recorded history.
type Op struct {
	Compose bool
	ID      string   // decompose: the system; compose: the system made ("" if refused)
	Blocks  []string // compose: the blocks it got, sorted
}

// Result is an operation's outcome as the client saw it: OK for an
// acknowledged change, false for a refusal that changed nothing.
// Operations whose outcome the client could not know (a lost answer) are
// left out of the history.
type Result struct {
	OK bool
}

// Model: a compose that succeeded took blocks no system held and a new ID;
// a decompose that succeeded freed a system that existed. Refusals change
// nothing and are always allowed. The state is the systems with their
// blocks.
var Model = porcupine.Model{
	Init: func() any { return map[string][]string{} },
	Step: func(state, input, output any) (bool, any) {
		st := state.(map[string][]string)
		in, out := input.(Op), output.(Result)
		if !out.OK {
			return true, state
		}
		if in.Compose {
			if _, ok := st[in.ID]; ok {
				return false, state
			}
			for _, bs := range st {
				for _, b := range bs {
					if slices.Contains(in.Blocks, b) {
						return false, state
					}
				}
			}
			next := maps.Clone(st)
			next[in.ID] = in.Blocks
			return true, next
		}
		if _, ok := st[in.ID]; !ok {
			return false, state
		}
		next := maps.Clone(st)
		delete(next, in.ID)
		return true, next
	},
	Equal: func(a, b any) bool {
		return maps.EqualFunc(a.(map[string][]string), b.(map[string][]string), slices.Equal[[]string])
	},
	DescribeOperation: func(input, output any) string {
		in := input.(Op)
		if in.Compose {
			return fmt.Sprintf("compose -> %s %v (%v)", in.ID, in.Blocks, output.(Result).OK)
		}
		return fmt.Sprintf("decompose %s (%v)", in.ID, output.(Result).OK)
	},
}
