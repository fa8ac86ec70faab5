"""The checks that tell a real value from a look-alike: Luhn, the resident ID's MOD 11-2, IBAN mod-97."""

from __future__ import annotations

from datetime import date

__all__ = ["cn_id_valid", "iban_valid", "luhn_valid"]


# a digit doubled, its digits summed: 0 2 4 6 8 1 3 5 7 9
_DOUBLED = str.maketrans("0123456789", "0246813579")


def luhn_valid(digits: str) -> bool:
    """The Luhn check of a string of ASCII digits (every second digit from the right doubled)."""
    # summing bytes is one C call; int() per digit was most of a card's check
    summed = (digits[-1::-2] + digits[-2::-2].translate(_DOUBLED)).encode()
    return (sum(summed) - 48 * len(summed)) % 10 == 0


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
