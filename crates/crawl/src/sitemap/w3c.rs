//! W3C datetime (https://www.w3.org/TR/NOTE-datetime), the `lastmod` format: `YYYY`,
//! `YYYY-MM`, `YYYY-MM-DD`, or a date with `Thh:mm`, `Thh:mm:ss` or `Thh:mm:ss.s` and a
//! zone (`Z`, `+hh:mm`, `-hh:mm`). A time without a zone is read as UTC (seen in the wild;
//! the note requires the zone).

/// The instant as unix milliseconds (UTC); None when the text is not a W3C datetime.
pub fn parse_w3c_datetime(s: &str) -> Option<i64> {
    let s = s.trim();
    let (date, time) = match s.split_once(['T', 't']) {
        Some((d, t)) => (d, Some(t)),
        None => (s, None),
    };
    let mut parts = date.split('-');
    let year = number(parts.next()?, 4)?;
    let month = parts.next().map(|m| number(m, 2)).unwrap_or(Some(1))?;
    let day = parts.next().map(|d| number(d, 2)).unwrap_or(Some(1))?;
    if parts.next().is_some() || !(1..=12).contains(&month) {
        return None;
    }
    if day < 1 || day > days_in_month(year, month) {
        return None;
    }
    let mut ms = days_from_civil(year, month, day) * 86_400_000;
    if let Some(time) = time {
        // a time needs a full date
        if date.len() != 10 {
            return None;
        }
        ms += time_of_day_ms(time)?;
    }
    Some(ms)
}

/// `hh:mm[:ss[.s+]]` and a zone, as ms after midnight UTC (may be negative or past a day).
fn time_of_day_ms(t: &str) -> Option<i64> {
    let (clock, offset_min) = if let Some(c) = t.strip_suffix(['Z', 'z']) {
        (c, 0)
    } else if let Some(at) = t.rfind(['+', '-']) {
        let (c, zone) = t.split_at(at);
        let sign = if zone.starts_with('-') { -1 } else { 1 };
        let (h, m) = zone[1..].split_once(':')?;
        let (h, m) = (number(h, 2)?, number(m, 2)?);
        if h > 23 || m > 59 {
            return None;
        }
        (c, sign * (h * 60 + m))
    } else {
        (t, 0)
    };
    let mut fields = clock.split(':');
    let h = number(fields.next()?, 2)?;
    let m = number(fields.next()?, 2)?;
    let (s, frac_ms) = match fields.next() {
        None => (0, 0),
        Some(sec) => {
            let (whole, frac) = match sec.split_once('.') {
                Some((w, f)) => (w, Some(f)),
                None => (sec, None),
            };
            let frac_ms = match frac {
                None => 0,
                Some(f) if !f.is_empty() && f.bytes().all(|b| b.is_ascii_digit()) => {
                    // first three digits, padded: ".5" is 500 ms
                    let mut digits: String = f.chars().take(3).collect();
                    while digits.len() < 3 {
                        digits.push('0');
                    }
                    digits.parse::<i64>().ok()?
                }
                Some(_) => return None,
            };
            (number(whole, 2)?, frac_ms)
        }
    };
    if fields.next().is_some() || h > 23 || m > 59 || s > 60 {
        return None;
    }
    Some(((h * 60 + m - offset_min) * 60 + s) * 1000 + frac_ms)
}

/// Exactly `len` ASCII digits.
fn number(s: &str, len: usize) -> Option<i64> {
    (s.len() == len && s.bytes().all(|b| b.is_ascii_digit()))
        .then(|| s.parse().ok())
        .flatten()
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
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
    use super::*;

    #[test]
    fn every_w3c_form_reads() {
        assert_eq!(parse_w3c_datetime("1970-01-01"), Some(0));
        assert_eq!(parse_w3c_datetime("1970"), Some(0));
        assert_eq!(parse_w3c_datetime("1970-02"), Some(31 * 86_400_000));
        // 2005-01-01 is day 12784
        assert_eq!(parse_w3c_datetime("2005-01-01"), Some(12_784 * 86_400_000));
        let noon = 12_784 * 86_400_000 + 12 * 3_600_000;
        assert_eq!(parse_w3c_datetime("2005-01-01T12:00Z"), Some(noon));
        assert_eq!(parse_w3c_datetime("2005-01-01T12:00:00Z"), Some(noon));
        assert_eq!(parse_w3c_datetime("2005-01-01T13:00:00+01:00"), Some(noon));
        assert_eq!(parse_w3c_datetime("2005-01-01T10:30:00-01:30"), Some(noon));
        assert_eq!(
            parse_w3c_datetime(" 2005-01-01T12:00:00.5Z "),
            Some(noon + 500)
        );
        assert_eq!(parse_w3c_datetime("2005-01-01T12:00:00"), Some(noon));
        assert_eq!(parse_w3c_datetime("2024-02-29"), Some(19_782 * 86_400_000));
    }

    #[test]
    fn what_is_not_a_w3c_datetime_is_none() {
        for bad in [
            "",
            "yesterday",
            "2005-13-01",
            "2005-02-30",
            "2023-02-29",
            "05-01-01",
            "2005-1-1",
            "2005-01-01T25:00Z",
            "2005-01-01T12Z",
            "2005-01T12:00Z",
            "2005-01-01T12:00:00+0100",
            "2005-01-01T12:00:00.Z",
            "2005-01-01-01",
            "２００５",
        ] {
            assert_eq!(parse_w3c_datetime(bad), None, "{bad:?}");
        }
    }
}
