// The structured values the benchmarks cache beside byte strings (issue 34), shaped as a Go program holds them:
// a query result as rows scanned into maps (map[string]any, []any: what database/sql scanning or decoding JSON
// into `any` gives) and as a slice of structs (what sqlx, pgx or GORM give), of about 1 KiB and 64 KiB of JSON; a
// nested document; a rendered page (a string). Deterministic, and the same data as the TypeScript benchmark's
// (clients/typescript/bench/shapes.ts).
package bench

import (
	"fmt"
	"math"
	"strings"
)

// row is one record of a query result, as an ORM scans it.
type row struct {
	ID     int64   `json:"id" msgpack:"id"`
	Name   string  `json:"name" msgpack:"name"`
	Score  float64 `json:"score" msgpack:"score"`
	Active bool    `json:"active" msgpack:"active"`
	Parent *int64  `json:"parent" msgpack:"parent"`
}

// queryResult is a page of rows with its paging fields.
type queryResult struct {
	Count    int     `json:"count" msgpack:"count"`
	Next     *string `json:"next" msgpack:"next"`
	Previous *string `json:"previous" msgpack:"previous"`
	Results  []row   `json:"results" msgpack:"results"`
}

func rowAt(i int) row {
	r := row{ID: int64(100_000 + i), Name: fmt.Sprintf("Customer %d", i), Score: math.Round(float64((i*37)%1000)*1.7) / 10,
		Active: i%3 != 0}
	if i%5 != 0 {
		p := int64(1000 + i%17)
		r.Parent = &p
	}
	return r
}

// queryStructs is a query result of n rows as structs.
func queryStructs(n int) queryResult {
	q := queryResult{Count: n, Results: make([]row, n)}
	for i := range q.Results {
		q.Results[i] = rowAt(i)
	}
	return q
}

// queryMaps is the same query result as maps, as generic row scanning gives it.
func queryMaps(n int) map[string]any {
	rows := make([]any, n)
	for i := range rows {
		r := rowAt(i)
		var parent any
		if r.Parent != nil {
			parent = *r.Parent
		}
		rows[i] = map[string]any{"id": r.ID, "name": r.Name, "score": r.Score, "active": r.Active, "parent": parent}
	}
	return map[string]any{"count": int64(n), "next": nil, "previous": nil, "results": rows}
}

// nestedDocument is a product page's data: maps in maps, lists of maps and of numbers.
func nestedDocument() map[string]any {
	variants := make([]any, 8)
	colors := []string{"steel", "black", "white", "red"}
	for i := range variants {
		variants[i] = map[string]any{
			"sku": fmt.Sprintf("KT-17-%d", i), "color": colors[i%4], "stock": int64(i * 3),
			"dims":   map[string]any{"w": 22.5, "h": int64(25), "d": 16.5},
			"images": []any{fmt.Sprintf("/img/kt17-%d-front.jpg", i), fmt.Sprintf("/img/kt17-%d-side.jpg", i)},
		}
	}
	return map[string]any{
		"id": int64(4711), "title": "Stainless steel kettle, 1.7 l",
		"price":    map[string]any{"amount": 49.9, "currency": "EUR", "discounted": false},
		"tags":     []any{"kitchen", "kettle", "steel", "electric"},
		"ratings":  map[string]any{"average": 4.4, "count": int64(318), "histogram": []any{int64(3), int64(9), int64(21), int64(96), int64(189)}},
		"variants": variants,
		"seller": map[string]any{"id": int64(17), "name": "Homeware GmbH", "verified": true,
			"address": map[string]any{"city": "Köln", "zip": "50667"}},
		"description": strings.Repeat("Boils 1.7 l in under four minutes. ", 6),
	}
}

// renderedPage is an HTML page of about n bytes.
func renderedPage(n int) string {
	var b strings.Builder
	b.WriteString("<!doctype html><html><head><title>Orders</title></head><body><table>")
	for i := 0; b.Len() < n-30; i++ {
		fmt.Fprintf(&b, "<tr><td>%d</td><td>Customer %d</td><td class=\"n\">%d.50</td></tr>\n", 100_000+i, i, (i*7)%1000)
	}
	b.WriteString("</table></body></html>")
	return b.String()
}
