"""Dates as n8n reads them in a condition (n8n-workflow's tryToParseDateTime): the text is tried
as ISO 8601, then as an HTTP date, RFC 2822, SQL, and last as JavaScript's Date.parse would read
it. The result is an aware datetime; a text without an offset is read as UTC (n8n reads it in
the instance's time zone: the two agree where the instance runs in UTC, as the differential
tests' n8n does).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime

# What datetime.fromisoformat reads beyond ISO 8601 and luxon does not: leave it to the others.
_ISO_SHAPE = re.compile(r"\d{4}-?\d{2}(-?\d{2})?([T ][\d:.,]+(Z|[+-][\d:]+)?)?", re.ASCII)
_MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
# Date.parse's common non-ISO forms: 2024/01/15, 01/15/2024, "Jan 15 2024", "15 Jan 2024"
_SLASHED_YMD = re.compile(r"(\d{4})/(\d{1,2})/(\d{1,2})(?:[ T](\d{1,2}):(\d{2})(?::(\d{2}))?)?")
_SLASHED_MDY = re.compile(r"(\d{1,2})/(\d{1,2})/(\d{4})(?:[ T](\d{1,2}):(\d{2})(?::(\d{2}))?)?")
_NAMED_MONTH = re.compile(
    r"(?:[a-z]+,?\s+)?(?:([a-z]{3})[a-z]*\.?\s+(\d{1,2}),?|(\d{1,2})\s+([a-z]{3})[a-z]*\.?,?)"
    r"\s+(\d{4})(?:\s+(\d{1,2}):(\d{2})(?::(\d{2}))?)?",
    re.IGNORECASE,
)


def parse_datetime(value: object) -> datetime | None:
    """The instant `value` names, or None when n8n would not read it as a date."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    text = _text(value).strip()
    if not text:
        return None
    for reader in (_iso, _http_or_rfc2822, _date_parse):
        found = reader(text)
        if found is not None:
            return found
    return None


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _iso(text: str) -> datetime | None:
    if not _ISO_SHAPE.fullmatch(text):
        return None
    try:
        return _aware(datetime.fromisoformat(text.replace(",", ".")))
    except ValueError:
        return None


def _http_or_rfc2822(text: str) -> datetime | None:
    if not re.search(r"[a-zA-Z]{3}", text) or not re.search(r"\d{1,2}:\d{2}", text):
        return None
    try:
        return _aware(parsedate_to_datetime(text))
    except (TypeError, ValueError, IndexError):
        return None


def _date_parse(text: str) -> datetime | None:
    """JavaScript's Date.parse for the forms people write by hand (local time: UTC here)."""
    if match := _SLASHED_YMD.fullmatch(text):
        year, month, day, *clock = match.groups()
        return _built(year, month, day, clock)
    if match := _SLASHED_MDY.fullmatch(text):
        month, day, year, *clock = match.groups()
        return _built(year, month, day, clock)
    if match := _NAMED_MONTH.fullmatch(text):
        name1, day1, day2, name2, year, *clock = match.groups()
        name = (name1 or name2).lower()
        if name not in _MONTHS:
            return None
        return _built(year, str(_MONTHS.index(name) + 1), day1 or day2, clock)
    return None


def _built(year: str, month: str, day: str, clock: list[str | None]) -> datetime | None:
    hour, minute, second = (int(part or 0) for part in clock)
    try:
        start = datetime(int(year), int(month), int(day), tzinfo=UTC)
    except ValueError:
        return None
    return start + timedelta(hours=hour, minutes=minute, seconds=second)
