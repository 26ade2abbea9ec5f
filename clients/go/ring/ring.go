// Package ring picks a memcached server for a key by classic ketama (STORES.md §4.2), as libmemcached and
// twemproxy compute it, so every larder language sends a key to the same server of a pool.
package ring

import (
	"crypto/md5"
	"encoding/binary"
	"math"
	"sort"
	"strconv"
)

// Server is one entry of a pool: host exactly as written in the URL (IPv6 in brackets), port and weight.
type Server struct {
	Host   string
	Port   int
	Weight int
}

// Point is one point of the continuum: its value and the index of its server in the full list.
type Point struct {
	Value  uint32
	Server int
}

// Ring is a built continuum.
type Ring struct {
	Points []Point
}

// Build builds the continuum of servers, leaving out those whose index is in ejected (the others keep their
// original weights and indexes).
func Build(servers []Server, ejected map[int]bool) *Ring {
	type live struct {
		s     Server
		index int
	}
	var kept []live
	total := 0
	for i, s := range servers {
		if !ejected[i] {
			kept = append(kept, live{s, i})
			total += s.Weight
		}
	}
	r := &Ring{}
	if total == 0 {
		return r
	}
	for _, l := range kept {
		share := float64(l.s.Weight) / float64(total)
		points := int(math.Floor(share*160/4*float64(len(kept))+1e-10)) * 4
		for n := 0; n < points/4; n++ {
			digest := md5.Sum([]byte(pointName(l.s, n)))
			for x := 0; x < 4; x++ {
				r.Points = append(r.Points, Point{binary.LittleEndian.Uint32(digest[4*x:]), l.index})
			}
		}
	}
	sort.Slice(r.Points, func(i, j int) bool {
		a, b := r.Points[i], r.Points[j]
		return a.Value < b.Value || (a.Value == b.Value && a.Server < b.Server)
	})
	return r
}

func pointName(s Server, n int) string {
	if s.Port == 11211 {
		return s.Host + "-" + strconv.Itoa(n)
	}
	return s.Host + ":" + strconv.Itoa(s.Port) + "-" + strconv.Itoa(n)
}

// Hash is the ketama hash of a stored key: the first four bytes of its MD5, little-endian.
func Hash(key string) uint32 {
	d := md5.Sum([]byte(key))
	return binary.LittleEndian.Uint32(d[:4])
}

// Pick returns the index of the server for key, or -1 when the ring is empty.
func (r *Ring) Pick(key string) int {
	if len(r.Points) == 0 {
		return -1
	}
	h := Hash(key)
	i := sort.Search(len(r.Points), func(i int) bool { return r.Points[i].Value >= h })
	if i == len(r.Points) {
		i = 0
	}
	return r.Points[i].Server
}
