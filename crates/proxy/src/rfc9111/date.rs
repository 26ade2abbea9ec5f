//! HTTP-date parsing (RFC 9110 §5.6.7): IMF-fixdate and the two obsolete forms recipients must accept (RFC 850 and
//! asctime). Names of days, months and the zone are read case-insensitively and the weekday is not checked against
//! the date (senders get them wrong, and nothing depends on them); everything else is strict, so `2:01:18`,
//! two-digit years in IMF-fixdate, other time zones, or doubled spaces are not dates. (The `httpdate` crate rejects
//! a wrong weekday and wrong-case names, which the conformance suite counts against a cache.)

const MONTHS: [&str; 12] = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];
const DAYS: [&str; 7] = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];
const FULL_DAYS: [&str; 7] = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"];

/// Milliseconds since the epoch for an HTTP-date, or `None` if `text` is not one. `now_year` resolves RFC 850's
/// two-digit years (RFC 9110: a year more than 50 years in the future means the previous century).
pub fn parse(text: &str, now_year: i64) -> Option<u64> {
    let text = text.trim();
    imf_fixdate(text).or_else(|| rfc850(text, now_year)).or_else(|| asctime(text))
}

/// `Sun, 06 Nov 1994 08:49:37 GMT`
fn imf_fixdate(text: &str) -> Option<u64> {
    let (day_name, rest) = text.split_once(", ")?;
    if !DAYS.contains(&day_name.to_ascii_lowercase().as_str()) {
        return None;
    }
    let parts: Vec<&str> = rest.split(' ').collect();
    let [day, month, year, time, zone] = parts.as_slice() else { return None };
    if day.len() != 2 || year.len() != 4 || !zone.eq_ignore_ascii_case("GMT") {
        return None;
    }
    to_epoch_ms(number(year)?, month_number(month)?, number(day)?, time)
}

/// `Sunday, 06-Nov-94 08:49:37 GMT`
fn rfc850(text: &str, now_year: i64) -> Option<u64> {
    let (day_name, rest) = text.split_once(", ")?;
    if !FULL_DAYS.contains(&day_name.to_ascii_lowercase().as_str()) {
        return None;
    }
    let parts: Vec<&str> = rest.split(' ').collect();
    let [date, time, zone] = parts.as_slice() else { return None };
    if !zone.eq_ignore_ascii_case("GMT") {
        return None;
    }
    let pieces: Vec<&str> = date.split('-').collect();
    let [day, month, year] = pieces.as_slice() else { return None };
    if day.len() != 2 || year.len() != 2 {
        return None;
    }
    let mut full_year = (now_year / 100) * 100 + number(year)?;
    if full_year > now_year + 50 {
        full_year -= 100;
    }
    to_epoch_ms(full_year, month_number(month)?, number(day)?, time)
}

/// `Sun Nov  6 08:49:37 1994`
fn asctime(text: &str) -> Option<u64> {
    let bytes = text.as_bytes();
    if bytes.len() != 24 || bytes[3] != b' ' || bytes[7] != b' ' || bytes[10] != b' ' || bytes[19] != b' ' {
        return None;
    }
    if !DAYS.contains(&text[..3].to_ascii_lowercase().as_str()) {
        return None;
    }
    let day = text[8..10].trim_start();
    if day.is_empty() || (text.as_bytes()[8] != b' ' && day.len() != 2) {
        return None;
    }
    to_epoch_ms(number(&text[20..24])?, month_number(&text[4..7])?, number(day)?, &text[11..19])
}

fn number(digits: &str) -> Option<i64> {
    (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())).then(|| digits.parse().ok()).flatten()
}

fn month_number(name: &str) -> Option<i64> {
    MONTHS.iter().position(|m| m.eq_ignore_ascii_case(name)).map(|i| i as i64 + 1)
}

/// `HH:MM:SS` on the given day, as ms since the epoch.
fn to_epoch_ms(year: i64, month: i64, day: i64, time: &str) -> Option<u64> {
    let clock: Vec<&str> = time.split(':').collect();
    let [h, m, s] = clock.as_slice() else { return None };
    if h.len() != 2 || m.len() != 2 || s.len() != 2 {
        return None;
    }
    let (h, m, s) = (number(h)?, number(m)?, number(s)?);
    if !(1..=31).contains(&day) || h > 23 || m > 59 || s > 60 || year < 1970 {
        return None;
    }
    let seconds = days_from_civil(year, month, day) * 86_400 + h * 3600 + m * 60 + s;
    u64::try_from(seconds).ok().map(|s| s * 1000)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::parse;

    const NOV_6_1994: u64 = 784_111_777_000;

    #[test]
    fn the_three_formats_agree() {
        assert_eq!(parse("Sun, 06 Nov 1994 08:49:37 GMT", 2026), Some(NOV_6_1994));
        assert_eq!(parse("Sunday, 06-Nov-94 08:49:37 GMT", 2026), Some(NOV_6_1994));
        assert_eq!(parse("Sun Nov  6 08:49:37 1994", 2026), Some(NOV_6_1994));
    }

    #[test]
    fn names_are_case_insensitive_and_weekdays_unchecked() {
        assert_eq!(parse("SUN, 06 NOV 1994 08:49:37 gmt", 2026), Some(NOV_6_1994));
        assert_eq!(parse("Thu, 06 Nov 1994 08:49:37 GMT", 2026), Some(NOV_6_1994));
        assert!(parse("Thu Aug  8 02:01:18 2050", 2026).is_some());
    }

    #[test]
    fn malformed_dates_are_refused() {
        for bad in [
            "0",
            "Thu, 18 Aug 50 02:01:18 GMT",
            "Thu, 18-Aug-2050 02:01:18 GMT",
            "Thu, 18 Aug 2050 02.01.18 GMT",
            "Thu, 18 Aug 2050 2:01:18 GMT",
            "Thu 18 Aug 2050 02:01:18 GMT",
            "Thu,  18 Aug 2050 02:01:18 GMT",
            "Thu, 18 Aug 2050 02:01:18 UTC",
            "Thu, 18 Aug 2050 02:01:18 AEST",
            "Thu, 32 Aug 2050 02:01:18 GMT",
        ] {
            assert_eq!(parse(bad, 2026), None, "{bad}");
        }
    }

    #[test]
    fn two_digit_years_stay_within_fifty_years() {
        let y2049 = parse("Thursday, 18-Aug-49 00:00:00 GMT", 2026).expect("parses");
        let y1977 = parse("Thursday, 18-Aug-77 00:00:00 GMT", 2026).expect("parses");
        assert!(y2049 > y1977);
    }
}
