// HTTP-dates (RFC 9110 §5.6.7, spec/HTTP.md §1.5), read strictly: IMF-fixdate, RFC 850 and asctime; names in
// any case, the weekday not checked against the date, everything else exactly as the grammar says. An Expires
// that is not an HTTP-date must read as "already expired", so nothing lenient is used here.
package httprules

import (
	"strings"
	"time"
)

var months = []string{"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"}
var days = []string{"mon", "tue", "wed", "thu", "fri", "sat", "sun"}
var fullDays = []string{"monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"}

func index(list []string, s string) int {
	s = lower(s)
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}

// ParseHTTPDate reads text (spaces and tabs around it ignored) as ms since the epoch. nowMs resolves RFC 850's
// two-digit year.
func ParseHTTPDate(text string, nowMs int64) (int64, bool) {
	t := strings.Trim(text, " \t")
	// IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT" (29 bytes)
	if len(t) == 29 && t[3] == ',' && t[4] == ' ' && t[7] == ' ' && t[11] == ' ' && t[16] == ' ' && t[25] == ' ' &&
		alpha(t[0:3]) && alpha(t[8:11]) && alpha(t[26:29]) {
		if index(days, t[0:3]) < 0 || lower(t[26:29]) != "gmt" {
			return 0, false
		}
		day, ok1 := num(t[5:7])
		year, ok2 := num(t[12:16])
		h, m, s, ok3 := clock(t[17:25])
		if !(ok1 && ok2 && ok3) {
			return 0, false
		}
		return epochMs(year, t[8:11], day, h, m, s)
	}
	// RFC 850: "Sunday, 06-Nov-94 08:49:37 GMT"
	if comma := strings.IndexByte(t, ','); comma > 0 && alpha(t[:comma]) && len(t) == comma+24 {
		r := t[comma:]
		if r[1] != ' ' || r[4] != '-' || r[8] != '-' || r[11] != ' ' || r[20] != ' ' || !alpha(r[5:8]) || !alpha(r[21:24]) {
			return 0, false
		}
		if index(fullDays, t[:comma]) < 0 || lower(r[21:24]) != "gmt" {
			return 0, false
		}
		day, ok1 := num(r[2:4])
		short, ok2 := num(r[9:11])
		h, m, s, ok3 := clock(r[12:20])
		if !(ok1 && ok2 && ok3) {
			return 0, false
		}
		nowYear := time.UnixMilli(nowMs).UTC().Year()
		year := nowYear/100*100 + short
		if year > nowYear+50 {
			year -= 100
		}
		return epochMs(year, r[5:8], day, h, m, s)
	}
	// asctime: "Sun Nov  6 08:49:37 1994"
	if len(t) == 24 && t[3] == ' ' && t[7] == ' ' && t[10] == ' ' && t[19] == ' ' && alpha(t[0:3]) && alpha(t[4:7]) {
		if index(days, t[0:3]) < 0 {
			return 0, false
		}
		var day int
		var ok1 bool
		if t[8] == ' ' {
			day, ok1 = num(t[9:10])
		} else {
			day, ok1 = num(t[8:10])
		}
		h, m, s, ok2 := clock(t[11:19])
		year, ok3 := num(t[20:24])
		if !(ok1 && ok2 && ok3) {
			return 0, false
		}
		return epochMs(year, t[4:7], day, h, m, s)
	}
	return 0, false
}

func alpha(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isAlpha(s[i]) {
			return false
		}
	}
	return true
}

func num(s string) (int, bool) {
	if s == "" {
		return 0, false
	}
	v := 0
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return 0, false
		}
		v = v*10 + int(s[i]-'0')
	}
	return v, true
}

func clock(s string) (int, int, int, bool) {
	if len(s) != 8 || s[2] != ':' || s[5] != ':' {
		return 0, 0, 0, false
	}
	h, ok1 := num(s[0:2])
	m, ok2 := num(s[3:5])
	sec, ok3 := num(s[6:8])
	return h, m, sec, ok1 && ok2 && ok3
}

func epochMs(year int, month string, day, h, m, s int) (int64, bool) {
	mi := index(months, month)
	if mi < 0 || day < 1 || day > 31 || h > 23 || m > 59 || s > 60 || year < 1970 {
		return 0, false
	}
	return time.Date(year, time.Month(mi+1), day, h, m, s, 0, time.UTC).UnixMilli(), true
}

// FormatHTTPDate writes ms as an IMF-fixdate.
func FormatHTTPDate(ms int64) string {
	return time.UnixMilli(ms).UTC().Format(http1123)
}

const http1123 = "Mon, 02 Jan 2006 15:04:05 GMT"
