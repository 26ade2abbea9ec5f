// The value model every serializer shares: what a msgpack or JSON payload decodes to, and what encoders take.
// Go maps have no order, and larder's byte identity needs the order a document was written in (FORMAT.md §2),
// so maps are *Map: an ordered list of pairs that may repeat a key, as MessagePack and JSON payloads can.
package format

// Pair is one key and value of a Map, in document order.
type Pair struct {
	Key   any
	Value any
}

// Map is a MessagePack or JSON map with its order, and any duplicate keys, kept.
type Map struct {
	Pairs []Pair
}

// NewMap builds a map from alternating keys and values: NewMap("id", 7, "name", "Ada").
func NewMap(kv ...any) *Map {
	m := &Map{Pairs: make([]Pair, 0, len(kv)/2)}
	for i := 0; i+1 < len(kv); i += 2 {
		m.Pairs = append(m.Pairs, Pair{kv[i], kv[i+1]})
	}
	return m
}

// Get returns the value of the last pair whose key is the string key.
func (m *Map) Get(key string) (any, bool) {
	if m == nil {
		return nil, false
	}
	for i := len(m.Pairs) - 1; i >= 0; i-- {
		if k, ok := m.Pairs[i].Key.(string); ok && k == key {
			return m.Pairs[i].Value, true
		}
	}
	return nil, false
}

// Set replaces the value of the first pair with this key (dropping later duplicates), or appends a pair.
func (m *Map) Set(key string, value any) {
	for i := range m.Pairs {
		if k, ok := m.Pairs[i].Key.(string); ok && k == key {
			m.Pairs[i].Value = value
			out := m.Pairs[:i+1]
			for _, p := range m.Pairs[i+1:] {
				if k2, ok := p.Key.(string); !ok || k2 != key {
					out = append(out, p)
				}
			}
			m.Pairs = out
			return
		}
	}
	m.Pairs = append(m.Pairs, Pair{key, value})
}

// Len is the number of pairs.
func (m *Map) Len() int {
	if m == nil {
		return 0
	}
	return len(m.Pairs)
}

// Ext is a MessagePack extension value kept opaque: larder never interprets another language's ext
// (80 = a signed pickle, 101 = a signed Marshal dump; FORMAT.md §2).
type Ext struct {
	Type int8
	Data []byte
}

// MaxNesting is how deep arrays and maps may nest (FORMAT.md §2): the top-level value is at level 0, and a
// container at level 100 or more is too deep.
const MaxNesting = 100
