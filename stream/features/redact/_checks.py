"""The checks that tell a real value from a look-alike: Luhn, the resident ID's MOD 11-2, IBAN mod-97."""

from __future__ import annotations

from datetime import date

__all__ = ["cn_id_valid", "iban_valid", "luhn_valid"]


def luhn_valid(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


_ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
_ID_CHECK = "10X98765432"


def cn_id_valid(number: str) -> bool:
    """An 18-character resident ID number: a real birth date and the MOD 11-2 check character."""
    if len(number) != 18 or not number[:17].isdigit():
        return False
    try:
        born = date(int(number[6:10]), int(number[10:12]), int(number[12:14]))
    except ValueError:
        return False
    if born.year < 1900:
        return False
    total = sum(int(c) * w for c, w in zip(number[:17], _ID_WEIGHTS, strict=True))
    return _ID_CHECK[total % 11] == number[17].upper()


# ISO 13616 lengths of the countries most often seen (others: 15-34 characters, the check alone)
_IBAN_LENGTHS = {
    "AD": 24, "AE": 23, "AT": 20, "BE": 16, "BG": 22, "BH": 22, "BR": 29, "CH": 21, "CY": 28, "CZ": 24,
    "DE": 22, "DK": 18, "EE": 20, "ES": 24, "FI": 18, "FR": 27, "GB": 22, "GR": 27, "HR": 21, "HU": 28,
    "IE": 22, "IL": 23, "IS": 26, "IT": 27, "LI": 21, "LT": 20, "LU": 20, "LV": 21, "MC": 27, "MT": 31,
    "NL": 18, "NO": 15, "PL": 28, "PT": 25, "QA": 29, "RO": 24, "SA": 24, "SE": 24, "SI": 19, "SK": 24,
    "SM": 27, "TR": 26, "UA": 29,
}  # fmt: skip


def iban_valid(value: str) -> bool:
    value = value.upper()
    length = _IBAN_LENGTHS.get(value[:2])
    if (length is not None and len(value) != length) or not 15 <= len(value) <= 34:
        return False
    moved = value[4:] + value[:4]
    try:
        number = int("".join(str(int(ch, 36)) for ch in moved))
    except ValueError:
        return False
    return number % 97 == 1
