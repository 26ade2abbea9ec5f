"""HTTP-dates (RFC 9110 §5.6.7, spec/HTTP.md §1.5), read strictly: the `Date`, `Expires` and `Last-Modified` values
larder's storage rules compute with.

The three formats are IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), RFC 850 (`Sunday, 06-Nov-94 08:49:37 GMT`) and
asctime (`Sun Nov  6 08:49:37 1994`). Names of days and months and `GMT` are read in any case and the weekday is not
checked against the date; everything else is exactly the grammar: two-digit day, hour, minute and second, a
four-digit year in IMF-fixdate, single spaces, `GMT` and no other zone. `email.utils` is not used because it is far
more lenient (numeric zones, missing commas, one-digit hours, two-digit years in IMF-fixdate), and an `Expires` that
is not an HTTP-date must read as "already expired".
"""

from __future__ import annotations

import calendar
import re
import time
from typing import Final

_MONTHS: Final = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAYS: Final = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_FULL_DAYS: Final = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_CLOCK: Final = r"([0-9]{2}):([0-9]{2}):([0-9]{2})"
_IMF: Final = re.compile(rf"([A-Za-z]{{3}}), ([0-9]{{2}}) ([A-Za-z]{{3}}) ([0-9]{{4}}) {_CLOCK} ([A-Za-z]{{3}})")
_RFC850: Final = re.compile(rf"([A-Za-z]+), ([0-9]{{2}})-([A-Za-z]{{3}})-([0-9]{{2}}) {_CLOCK} ([A-Za-z]{{3}})")
_ASCTIME: Final = re.compile(rf"([A-Za-z]{{3}}) ([A-Za-z]{{3}}) ([0-9]{{2}}| [0-9]) {_CLOCK} ([0-9]{{4}})")


def parse_http_date(text: str, now_ms: int) -> int | None:
    """`text` (spaces and tabs around it ignored) as ms since the epoch, or None if it is not an HTTP-date.

    `now_ms` resolves RFC 850's two-digit year: the most recent year with those digits that is not more than 50
    years after the year of `now_ms`.
    """
    text = text.strip(" \t")
    found = _IMF.fullmatch(text)
    if found:
        day_name, day, month, year, hour, minute, second, zone = found.groups()
        if day_name.lower() not in _DAYS or zone.lower() != "gmt":
            return None
        return _epoch_ms(int(year), month, int(day), int(hour), int(minute), int(second))
    found = _RFC850.fullmatch(text)
    if found:
        day_name, day, month, short_year, hour, minute, second, zone = found.groups()
        if day_name.lower() not in _FULL_DAYS or zone.lower() != "gmt":
            return None
        now_year = time.gmtime(now_ms // 1000).tm_year
        year = now_year // 100 * 100 + int(short_year)
        if year > now_year + 50:
            year -= 100
        return _epoch_ms(year, month, int(day), int(hour), int(minute), int(second))
    found = _ASCTIME.fullmatch(text)
    if found:
        day_name, month, day, hour, minute, second, year = found.groups()
        if day_name.lower() not in _DAYS:
            return None
        return _epoch_ms(int(year), month, int(day.strip(" ")), int(hour), int(minute), int(second))
    return None


def format_http_date(ms: int) -> str:
    """`ms` since the epoch as an IMF-fixdate (the whole second it falls in)."""
    t = time.gmtime(ms // 1000)
    return (
        f"{_DAYS[t.tm_wday].title()}, {t.tm_mday:02d} {_MONTHS[t.tm_mon - 1].title()} {t.tm_year:04d}"
        f" {t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d} GMT"
    )


def _epoch_ms(year: int, month_name: str, day: int, hour: int, minute: int, second: int) -> int | None:
    """The fields' instant; None for a month that is not one, day outside 1-31, hour > 23, minute > 59, second >
    60 or a year before 1970. A day past the month's end (30 Feb) counts on into the next month, as in every
    implementation of spec/HTTP.md."""
    month = month_name.lower()
    if month not in _MONTHS or not 1 <= day <= 31 or hour > 23 or minute > 59 or second > 60 or year < 1970:
        return None
    return calendar.timegm((year, _MONTHS.index(month) + 1, day, hour, minute, second, 0, 0, 0)) * 1000
