// HTTP-dates (RFC 9110 §5.6.7, spec/HTTP.md §1.5), read strictly: IMF-fixdate, RFC 850 and asctime, names in any
// case, weekday not checked, everything else exactly the grammar; an Expires that is not one reads as expired.

const MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];
const DAYS = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];
const FULL_DAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"];
const CLOCK = "([0-9]{2}):([0-9]{2}):([0-9]{2})";
const IMF = new RegExp(`^([A-Za-z]{3}), ([0-9]{2}) ([A-Za-z]{3}) ([0-9]{4}) ${CLOCK} ([A-Za-z]{3})$`);
const RFC850 = new RegExp(`^([A-Za-z]+), ([0-9]{2})-([A-Za-z]{3})-([0-9]{2}) ${CLOCK} ([A-Za-z]{3})$`);
const ASCTIME = new RegExp(`^([A-Za-z]{3}) ([A-Za-z]{3}) ([0-9]{2}| [0-9]) ${CLOCK} ([0-9]{4})$`);

/** `text` (spaces and tabs around it ignored) as ms since the epoch, or undefined if it is not an HTTP-date.
 * `nowMs` resolves RFC 850's two-digit year: the most recent year with those digits not more than 50 years ahead. */
export function parseHttpDate(text: string, nowMs: number): number | undefined {
  const t = text.replace(/^[ \t]+|[ \t]+$/g, "");
  let m = IMF.exec(t);
  if (m !== null) {
    const [, dayName, day, month, year, h, mi, s, zone] = m as unknown as string[];
    if (!DAYS.includes((dayName as string).toLowerCase()) || (zone as string).toLowerCase() !== "gmt") return undefined;
    return epochMs(Number(year), month as string, Number(day), Number(h), Number(mi), Number(s));
  }
  m = RFC850.exec(t);
  if (m !== null) {
    const [, dayName, day, month, shortYear, h, mi, s, zone] = m as unknown as string[];
    if (!FULL_DAYS.includes((dayName as string).toLowerCase()) || (zone as string).toLowerCase() !== "gmt")
      return undefined;
    const nowYear = new Date(Math.floor(nowMs / 1000) * 1000).getUTCFullYear();
    let year = Math.floor(nowYear / 100) * 100 + Number(shortYear);
    if (year > nowYear + 50) year -= 100;
    return epochMs(year, month as string, Number(day), Number(h), Number(mi), Number(s));
  }
  m = ASCTIME.exec(t);
  if (m !== null) {
    const [, dayName, month, day, h, mi, s, year] = m as unknown as string[];
    if (!DAYS.includes((dayName as string).toLowerCase())) return undefined;
    return epochMs(Number(year), month as string, Number((day as string).trim()), Number(h), Number(mi), Number(s));
  }
  return undefined;
}

function epochMs(
  year: number,
  monthName: string,
  day: number,
  hour: number,
  minute: number,
  second: number,
): number | undefined {
  const month = MONTHS.indexOf(monthName.toLowerCase());
  if (month === -1 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60 || year < 1970) return undefined;
  // A day past the month's end (30 Feb) counts on into the next month, as everywhere in larder.
  return Date.UTC(year, month, day, hour, minute, second);
}

/** `ms` as an IMF-fixdate (the whole second it falls in). */
export function formatHttpDate(ms: number): string {
  return new Date(Math.floor(ms / 1000) * 1000).toUTCString();
}
