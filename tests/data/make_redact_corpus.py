"""Writes tests/data/redact_corpus.jsonl: the labelled corpus of the redaction detectors (docs/redact.md).

    python tests/data/make_redact_corpus.py

Deterministic (a fixed seed). Each line: ``{"lang": "en" | "zh", "text": ..., "spans": [{"kind", "value"}]}``,
``value`` written exactly as in the text. Three groups:

* positives: values of every kind in English and Chinese sentences, in the forms people write them;
* look-alikes (no span): order and tracking numbers, timestamps and dates, version strings, serial
  numbers, UUIDs, MAC addresses, prices, ISBNs, library names that start like keys;
* cards in their issuers' other groupings, dotted section and version numbers (look-alikes), and
  addresses near such words;
* hard positives the built-in detectors are known to miss (a national phone number without its
  country code, a card written with dots, an internationalised email, a 15-digit ID of the old form,
  a key format not in the list): kept so that recall is measured, not assumed.
"""

from __future__ import annotations

import base64
import random
import string
from pathlib import Path
from typing import Any

import orjson

OUT = Path(__file__).with_name("redact_corpus.jsonl")
rng = random.Random(20261127)


def luhn_complete(prefix: str, length: int) -> str:
    body = prefix + "".join(rng.choice(string.digits) for _ in range(length - len(prefix) - 1))
    for d in string.digits:
        number = body + d
        total = 0
        for i, ch in enumerate(reversed(number)):
            n = int(ch) * (2 if i % 2 else 1)
            total += n - 9 if n > 9 else n
        if total % 10 == 0:
            return number
    raise AssertionError


def card() -> str:
    prefix, length = rng.choice([("4", 16), ("51", 16), ("55", 16), ("2221", 16), ("62", 16), ("6011", 16)])
    number = luhn_complete(prefix, length)
    sep = rng.choice(["", " ", "-"])
    return sep.join(number[i : i + 4] for i in range(0, 16, 4))


def amex() -> str:
    number = luhn_complete(rng.choice(["34", "37"]), 15)
    return f"{number[:4]} {number[4:10]} {number[10:]}"


_W = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)


def cn_id() -> str:
    region = rng.choice(["110105", "310104", "440305", "510107", "330106", "420111"])
    born = f"{rng.randint(1950, 2005)}{rng.randint(1, 12):02d}{rng.randint(1, 28):02d}"
    body = region + born + f"{rng.randint(0, 999):03d}"
    return body + "10X98765432"[sum(int(c) * w for c, w in zip(body, _W, strict=True)) % 11]


def iban() -> str:
    country, bban_len = rng.choice([("DE", 18), ("GB", 18), ("FR", 23), ("NL", 14), ("ES", 20)])
    if country == "GB":
        bban = "".join(rng.choice(string.ascii_uppercase) for _ in range(4)) + "".join(
            rng.choice(string.digits) for _ in range(14)
        )
    elif country == "NL":
        bban = "".join(rng.choice(string.ascii_uppercase) for _ in range(4)) + "".join(
            rng.choice(string.digits) for _ in range(10)
        )
    else:
        bban = "".join(rng.choice(string.digits) for _ in range(bban_len))
    moved = bban + country + "00"
    check = 98 - int("".join(str(int(c, 36)) for c in moved)) % 97
    value = f"{country}{check:02d}{bban}"
    if rng.random() < 0.5:
        value = " ".join(value[i : i + 4] for i in range(0, len(value), 4))
    return value


def mobile() -> str:
    number = "1" + rng.choice("3456789") + "".join(rng.choice(string.digits) for _ in range(9))
    form = rng.choice(["plain", "plain", "dash", "space", "+86"])
    if form == "dash":
        return f"{number[:3]}-{number[3:7]}-{number[7:]}"
    if form == "space":
        return f"{number[:3]} {number[3:7]} {number[7:]}"
    if form == "+86":
        return f"+86 {number}"
    return number


def intl_phone() -> str:
    return rng.choice(
        [
            f"+44 20 {rng.randint(7000, 7999)} {rng.randint(1000, 9999)}",
            f"+1 415 {rng.randint(200, 999)} {rng.randint(1000, 9999)}",
            f"+49 30 {rng.randint(1000000, 9999999)}",
            f"+81-3-{rng.randint(1000, 9999)}-{rng.randint(1000, 9999)}",
            f"+33 1 {rng.randint(10, 99)} {rng.randint(10, 99)} {rng.randint(10, 99)} {rng.randint(10, 99)}",
        ]
    )


def us_phone() -> str:
    a, b, c = rng.randint(201, 989), rng.randint(200, 999), rng.randint(1000, 9999)
    return rng.choice([f"({a}) {b}-{c}", f"{a}-{b}-{c}"])


def landline() -> str:
    return rng.choice([f"010-{rng.randint(10000000, 99999999)}", f"0755-{rng.randint(1000000, 9999999)}"])


def email() -> str:
    user = rng.choice(["li.lei", "hanmeimei", "john.smith", "a.nguyen+news", "wang_fang88", "ops-team"])
    host = rng.choice(["example.com", "qq.com", "163.com", "mail.example.org", "corp.example.cn"])
    return f"{user}@{host}"


def ipv4() -> str:
    return f"{rng.choice([10, 172, 192, 203, 198, 45])}.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}"


def ipv6() -> str:
    return rng.choice(
        [
            f"2001:db8::{rng.randint(1, 65535):x}:{rng.randint(1, 65535):x}",
            f"fe80::{rng.randint(1, 65535):x}:{rng.randint(1, 65535):x}:{rng.randint(1, 65535):x}",
            ":".join(f"{rng.randint(0, 65535):x}" for _ in range(8)),
        ]
    )


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def jwt() -> str:
    header = b64url(orjson.dumps({"alg": rng.choice(["HS256", "RS256"]), "typ": "JWT"}))
    payload = b64url(orjson.dumps({"sub": str(rng.randint(1, 10**9)), "iat": rng.randint(1.6e9, 1.8e9)}))
    return f"{header}.{payload}.{b64url(rng.randbytes(32))}"


def token(chars: str, n: int) -> str:
    return "".join(rng.choice(chars) for _ in range(n))


ALNUM = string.ascii_letters + string.digits


def api_key() -> str:
    return rng.choice(
        [
            "AKIA" + token(string.ascii_uppercase + string.digits, 16),
            "sk-proj-" + token(ALNUM + "_-", 48),
            "sk-" + token(ALNUM, 48),
            "sk-ant-api03-" + token(ALNUM + "_-", 90),
            "ghp_" + token(ALNUM, 36),
            "github_pat_" + token(ALNUM + "_", 82),
            "xoxb-" + f"{rng.randint(10**10, 10**11)}-{rng.randint(10**10, 10**11)}-" + token(ALNUM, 24),
            "AIza" + token(ALNUM + "_-", 35),
            "sk_live_" + token(ALNUM, 24),
        ]
    )


def private_key() -> str:
    kind = rng.choice(["", "RSA ", "EC ", "OPENSSH "])
    body = "\n".join(token(ALNUM + "+/", 64) for _ in range(3))
    return f"-----BEGIN {kind}PRIVATE KEY-----\n{body}\n-----END {kind}PRIVATE KEY-----"


def url_credentials() -> tuple[str, str]:
    user, pw = rng.choice(["admin", "deploy", "svc_etl"]), token(ALNUM, 12)
    return (
        f"{rng.choice(['postgres', 'https', 'redis', 'mysql'])}://{user}:{pw}@db{rng.randint(1, 9)}.internal:5432/app",
        f"{user}:{pw}",
    )


def line(lang: str, template: str, **values: tuple[str, str]) -> dict[str, Any]:
    text = template.format(**{k: v for k, (_, v) in values.items()})
    return {"lang": lang, "text": text, "spans": [{"kind": kind, "value": v} for kind, v in values.values()]}


def positives() -> list[dict[str, Any]]:
    out = []
    for _ in range(12):
        e, m, c = email(), mobile(), card()
        out += [
            line("en", "Please email me at {e} about the refund.", e=("EMAIL", e)),
            line("zh", "您好，我的手机号是{m}，有问题随时联系。", m=("PHONE", m)),
            line("zh", "邮箱：{e}，电话{m}，谢谢！", e=("EMAIL", email()), m=("PHONE", mobile())),
            line(
                "en",
                "You can reach our London desk on {p} or the US line {u}.",
                p=("PHONE", intl_phone()),
                u=("PHONE", us_phone()),
            ),
            line("zh", "公司座机{l}，工作日9点到18点。", l=("PHONE", landline())),
            line("en", "My card number is {c} and it expires 12/27.", c=("CARD", c)),
            line("zh", "银行卡号{c}，开户行招商银行。", c=("CARD", card())),
            line("en", "Amex {a}, CVV withheld.", a=("CARD", amex())),
            line("zh", "身份证号码：{i}，请核实。", i=("CN_ID", cn_id())),
            line("en", "Applicant ID {i} (PRC resident card).", i=("CN_ID", cn_id())),
            line("en", "Transfer to IBAN {b}, reference INV-2291.", b=("IBAN", iban())),
            line("zh", "请汇款至账户 {b}。", b=("IBAN", iban())),
            line(
                "en",
                "The server at {v4} refused the connection; fallback {v6}.",
                v4=("IP", ipv4()),
                v6=("IP", ipv6()),
            ),
            line("zh", "用户登录IP：{v4}", v4=("IP", ipv4())),
            line("en", "Authorization: Bearer {j}", j=("JWT", jwt())),
            line("en", "export API_KEY={k}", k=("API_KEY", api_key())),
            line("zh", "这是我的密钥 {k} 别外传", k=("API_KEY", api_key())),
            line("en", "key file:\n{p}\nend", p=("PRIVATE_KEY", private_key())),
        ]
        url, cred = url_credentials()
        out.append(
            {
                "lang": "en",
                "text": f"Connect with {url} then run the migration.",
                "spans": [{"kind": "URL_CREDENTIALS", "value": cred}],
            }
        )
    return out


def look_alikes() -> list[dict[str, Any]]:
    out = []
    for _ in range(12):
        order = "2026" + "".join(rng.choice(string.digits) for _ in range(12))
        texts = [
            ("en", f"Order number {order} has shipped."),
            ("zh", f"订单号：{order}，预计明天送达。"),
            ("en", f"Tracking 1Z{token(string.ascii_uppercase + string.digits, 16)} via UPS."),
            ("zh", f"物流单号 SF{rng.randint(10**11, 10**12 - 1)}"),
            (
                "en",
                f"Logged at 2026-11-{rng.randint(10, 28)} {rng.randint(10, 23)}:{rng.randint(10, 59)}:{rng.randint(10, 59)} UTC.",
            ),
            (
                "zh",
                f"时间戳 {rng.randint(1_700_000_000_000, 1_800_000_000_000)}，日期 2026年11月{rng.randint(1, 28)}日",
            ),
            ("en", f"Batch 20261127{rng.randint(100000, 999999)} finished in {rng.randint(1, 999)} ms."),
            (
                "en",
                f"Upgrade to version {rng.randint(1, 12)}.{rng.randint(0, 9)}.{rng.randint(0, 20)}.{rng.randint(0, 300)} today.",
            ),
            (
                "zh",
                f"当前版本 v{rng.randint(1, 9)}.{rng.randint(0, 9)}.{rng.randint(0, 9)}.{rng.randint(0, 99)}，请升级。",
            ),
            ("en", f"Windows build 10.0.{rng.randint(19000, 22999)}.{rng.randint(1, 999)}"),
            ("en", f"Serial {rng.randint(10**17, 10**18 - 1)} is out of warranty."),
            (
                "en",
                f"Request id {rng.randbytes(16).hex()[:8]}-{rng.randbytes(2).hex()}-4{rng.randbytes(2).hex()[1:]}-a{rng.randbytes(2).hex()[1:]}-{rng.randbytes(6).hex()}",
            ),
            ("en", "MAC " + ":".join(f"{rng.randint(0, 255):02X}" for _ in range(6))),
            (
                "en",
                f"Total: ${rng.randint(1, 999)},{rng.randint(100, 999)},{rng.randint(100, 999)}.{rng.randint(10, 99)}",
            ),
            ("en", "ISBN 978-3-16-148410-0 and call extension 4021."),
            ("en", "We use sk-learn pipelines and the ghp-pages branch."),
            (
                "zh",
                f"会议在 {rng.randint(10, 23)}:{rng.randint(10, 59)} 开始，房间号 {rng.randint(1000, 9999)}。",
            ),
            ("en", f"Meet at localhost 127.0.0.1:{rng.randint(1024, 65535)} and bind to 0.0.0.0."),
            ("en", f"Coordinates {rng.uniform(-90, 90):.6f}, {rng.uniform(-180, 180):.6f}"),
            (
                "en",
                f"Product code DE{rng.randint(10, 99)} {rng.randint(1000, 9999)} {rng.randint(1000, 9999)} in stock.",
            ),
            ("en", "std::vector<int> and a::b in the C++ answer."),
            ("zh", f"快递柜取件码 {rng.randint(100000, 999999)}，验证码 {rng.randint(1000, 9999)}"),
            # numbers of any prefix: a share of them pass Luhn with an issuer's prefix (honest false positives)
            ("en", f"Order ref {token(string.digits, 16)} confirmed."),
            ("zh", f"流水号{token(string.digits, 19)}已入账。"),
            (
                "en",
                f"See section {rng.randint(1, 9)}.{rng.randint(1, 9)}.{rng.randint(1, 9)}.{rng.randint(1, 9)} of the spec.",
            ),
            (
                "en",
                f"Sent 2026-11-{rng.randint(10, 28)}T{rng.randint(10, 23)}:{rng.randint(10, 59)}:00+08:00 from the app.",
            ),
        ]
        out += [{"lang": lang, "text": text, "spans": []} for lang, text in texts]
    return out


def hard_positives() -> list[dict[str, Any]]:
    number = luhn_complete("4", 16)
    dotted = ".".join(number[i : i + 4] for i in range(0, 16, 4))
    return [
        {
            "lang": "en",
            "text": "Call me on 020 7946 0958 after six.",
            "spans": [{"kind": "PHONE", "value": "020 7946 0958"}],
        },
        {"lang": "en", "text": f"Card {dotted} please.", "spans": [{"kind": "CARD", "value": dotted}]},
        {
            "lang": "zh",
            "text": "邮箱 张三@例子.公司 已停用",
            "spans": [{"kind": "EMAIL", "value": "张三@例子.公司"}],
        },
        {
            "lang": "zh",
            "text": "旧身份证号 110105491231002 仍有效吗",
            "spans": [{"kind": "CN_ID", "value": "110105491231002"}],
        },
        {
            "lang": "en",
            "text": f"HF token hf_{token(ALNUM, 34)} leaked",
            "spans": [{"kind": "API_KEY", "value": ""}],
        },
    ]


def diners() -> str:
    number = luhn_complete(rng.choice(["300", "305", "36", "38"]), 14)
    sep = rng.choice([" ", "-"])
    return f"{number[:4]}{sep}{number[4:10]}{sep}{number[10:]}"


def dotted() -> str:
    return ".".join(str(rng.randint(1, 12)) for _ in range(4))


def groupings_and_numbering() -> list[dict[str, Any]]:
    """Cards in their issuers' other groupings (Diners Club 4-6-4, Amex 4-6-5 with dashes), dotted section
    and version numbers that are valid IPv4 addresses (look-alikes), and addresses near such words."""
    out = []
    for _ in range(6):
        number = luhn_complete(rng.choice(["34", "37"]), 15)
        out += [
            line("en", "Diners Club card {c}, exp 09/28.", c=("CARD", diners())),
            line("zh", "大来卡 {c} 已绑定。", c=("CARD", diners())),
            line("en", "Amex {a} on file.", a=("CARD", f"{number[:4]}-{number[4:10]}-{number[10:]}")),
            line("en", "Version 2 of the agent calls {v4} at start-up.", v4=("IP", ipv4())),
            line("zh", "第二台服务器 {v4} 已下线。", v4=("IP", ipv4())),
        ]
        texts = [
            ("en", f"As section {dotted()} requires, the notice goes out in writing."),
            ("en", f"Clause {dotted()} limits the liability."),
            ("zh", f"根据第 {dotted()} 节的规定办理。"),
            ("zh", f"参见第{dotted()}条。"),
            ("en", f"The latest version is {dotted()}."),
            ("en", f"Upgrade from {dotted()} to {dotted()} fixed it."),
            ("zh", f"请升级到 {dotted()} 版。"),
            ("en", f"Installed 0.{rng.randint(1, 12)}.{rng.randint(1, 12)}.{rng.randint(1, 12)} last week."),
        ]
        out += [{"lang": lang, "text": text, "spans": []} for lang, text in texts]
    return out


def main() -> None:
    rows = positives() + look_alikes() + hard_positives() + groupings_and_numbering()
    for row in rows:  # the HF token's value, read back from its text
        for span in row["spans"]:
            if not span["value"]:
                span["value"] = next(w for w in row["text"].split() if w.startswith("hf_"))
            assert span["value"] in row["text"], (span, row["text"])
    OUT.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    print(f"{len(rows)} lines -> {OUT}")


if __name__ == "__main__":
    main()
