"""A judged conversation set over a small company's documents, in English, Russian and Japanese.

The documents are real files of every kind a company keeps (Markdown with headings and a setext title,
a plain-text FAQ of Q:/A: pairs, a PDF of several pages, Word files, a spreadsheet, an HTML page),
written here for the set and built into a folder by `write_corpus`. The conversations mix direct
questions, follow-ups that cannot be understood alone, switches to a new topic, questions the
documents do not answer, questions in another language than their document, table rows, FAQ pairs,
PDF pages and headings that sit next to the sentence that answers. Each turn says what a right answer
contains, which file it comes from (and which page), or that the documents do not answer it.

The chat tests ask a sample of it; eval/bench_multiturn.py asks all of it and reports per category.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

SITE_PREFIX = "company"

VACATION_MD = """Brightwater Analytics — Vacation and Leave Policy
=================================================

This policy applies to everyone employed by Brightwater Analytics in the United Kingdom and Germany.

## Annual leave

Full-time employees receive 25 working days of paid annual leave per calendar year, in addition to public holidays.
Part-time employees receive the same entitlement in proportion to their contracted hours.
Leave requests are submitted in the HR portal at least two weeks in advance.

## Carrying over unused days

Up to five unused days may be carried over into the next year. Carried-over days expire if they are not taken by 31 March.

## Contractors

Contractors are not entitled to paid annual leave under this policy. They agree any days off directly with the manager who signed their contract.

## Sick leave

Employees receive up to ten days of sick leave at full pay per year. A doctor's note is required after three consecutive days of absence.

## Parental leave

Parents receive sixteen weeks of parental leave at full pay, which can be taken within the first year after the birth or adoption of a child.

## Japan offices

Employees of the Tokyo and Osaka offices follow the Japanese leave rules (休暇規程), which are published separately.
"""

EXPENSES_MD = """# Expense Policy

Brightwater Analytics reimburses reasonable costs that employees incur while working for the company.

## Meals

The daily meal allowance on a business trip is 60 euros. Alcohol is never reimbursed.

## Flights and trains

Flights shorter than six hours are booked in economy class. Train journeys under four hours are booked in standard class.

## Taxis

Taxis are reimbursed between 22:00 and 06:00, or when public transport is not available.

## Submitting expenses

Expense claims with scanned receipts must be submitted within 30 days of the expense. Claims are paid with the next monthly salary.
"""

REMOTE_RU_MD = """# Политика удалённой работы

Политика описывает, как сотрудники Brightwater Analytics работают вне офиса.

## Сколько можно работать из дома

Сотрудники могут работать из дома до трёх дней в неделю по согласованию с руководителем. Остальные дни проводятся в офисе.

## Основное рабочее время

С 11:00 до 16:00 по местному времени все сотрудники должны быть на связи в рабочем чате.

## Оборудование

Компания выдаёт ноутбук и второй монитор для работы из дома. Кресло и стол сотрудник приобретает сам.

## Компенсация расходов

За интернет компания компенсирует 1500 рублей в месяц. Компенсация начисляется вместе с зарплатой.
"""

FAQ_TXT = """Tidewatch Sensor — Frequently Asked Questions

Q: How long does the battery last?
A: A fully charged battery lasts about 18 months with the default reporting interval of 15 minutes.

Q: How often is the firmware updated?
A: We publish a firmware update every six weeks, and the sensor installs it automatically overnight.

Q: Is the sensor waterproof?
A: Yes, the housing is rated IP68 and survives immersion to a depth of two metres for 24 hours.

Q: How do I reset the sensor to factory settings?
A: Hold the button on the back for ten seconds until the light blinks red three times.

Q: What does the warranty cover?
A: The warranty covers manufacturing defects for two years from the date of purchase.

Q: Can I export my measurements?
A: Measurements can be exported as a CSV file from the Data page of the mobile app.
"""

ONBOARDING_PDF = [
    # One page each: the PDF loader keeps the page numbers.
    "Welcome to Brightwater Analytics. On your first day, please arrive at the reception desk at 9:00, where "
    "your badge will be ready. Bring your passport so that HR can complete your employment records.",
    "IT setup. Your laptop is handed over on the first day by the IT team. You must enable two-factor "
    "authentication on your account within 24 hours. All passwords are stored in the company password manager.",
    "Training and support. Every new employee completes the security awareness training within the first two "
    "weeks. A buddy from your team answers practical questions during the first month.",
]

TRAVEL_RU_DOCX = [
    ("title", "Положение о служебных командировках"),
    ("p", "Положение устанавливает порядок оформления и оплаты служебных командировок сотрудников."),
    ("h1", "Проживание"),
    ("p", "Стоимость гостиницы возмещается в пределах 7000 рублей за ночь. В Москве и Санкт-Петербурге лимит "
          "составляет 9000 рублей за ночь."),
    ("h1", "Суточные"),
    ("p", "Суточные выплачиваются в размере 700 рублей за каждый день командировки."),
    ("h1", "Авансовый отчёт"),
    ("p", "Авансовый отчёт с документами о расходах сдаётся в бухгалтерию в течение трёх рабочих дней после "
          "возвращения."),
]

LEAVE_JA_DOCX = [
    ("title", "日本オフィス休暇規程"),
    ("p", "本規程は東京本社および大阪支社の社員に適用される。"),
    ("h1", "夏季休暇"),
    ("p", "社員は7月から9月の間に連続5日間の夏季休暇を取得できる。"),
    ("h1", "年末年始休暇"),
    ("p", "12月29日から1月3日までは年末年始休暇とし、全社休業とする。"),
    ("h1", "慶弔休暇"),
    ("p", "本人が結婚する場合は5日間、配偶者が出産する場合は2日間の特別休暇を取得できる。"),
]

SECURITY_JA_HTML = """<!DOCTYPE html>
<html lang="ja"><head><meta charset="utf-8"><title>情報セキュリティ規程</title></head>
<body><main>
<h1>情報セキュリティ規程</h1>
<p>本規程は、会社の情報資産を保護するために全社員が守るべきルールを定める。</p>
<h2>パスワード</h2>
<p>パスワードは12文字以上とし、英字・数字・記号を組み合わせなければならない。</p>
<h2>端末の紛失</h2>
<p>ノートパソコンやスマートフォンを紛失した場合は、24時間以内に情報システム部へ報告すること。</p>
<h2>画面ロック</h2>
<p>席を離れるときは必ず画面をロックし、5分間操作がない場合は自動的にロックされるよう設定する。</p>
<h2>外部記憶媒体</h2>
<p>USBメモリなどの外部記憶媒体の使用は、情報システム部の許可がない限り禁止する。</p>
</main></body></html>
"""

OFFICES_XLSX = {
    "支社一覧": [
        ["支社", "所在地", "電話番号", "支社長"],
        ["東京本社", "東京都千代田区丸の内1-2-3", "03-5211-4400", "佐藤 健"],
        ["大阪支社", "大阪市北区梅田2-4-9", "06-6345-7781", "田中 美咲"],
        ["福岡支社", "福岡市中央区天神1-8-1", "092-711-2090", "山本 翔"],
    ],
    "Offices": [
        ["Office", "Address", "Phone", "Manager"],
        ["London", "14 Tabernacle Street, London EC2A 4LU", "+44 20 7946 0321", "Olivia Hart"],
        ["Berlin", "Torstraße 109, 10119 Berlin", "+49 30 5557 1180", "Jonas Weber"],
        ["Manchester", "3 Hardman Square, Manchester M3 3EB", "+44 161 496 0544", "Priya Shah"],
    ],
}

FILES = {
    "handbook/vacation-policy.md": VACATION_MD,
    "handbook/expenses.md": EXPENSES_MD,
    "handbook/remote-work.md": REMOTE_RU_MD,
    "support/tidewatch-faq.txt": FAQ_TXT,
    "people/onboarding.pdf": ONBOARDING_PDF,
    "finance/командировки.docx": TRAVEL_RU_DOCX,
    "people/休暇規程.docx": LEAVE_JA_DOCX,
    "it/security-policy.html": SECURITY_JA_HTML,
    "admin/offices.xlsx": OFFICES_XLSX,
}


def _pdf(pages: Sequence[str]) -> bytes:
    from filebuilders import make_pdf

    return make_pdf(list(pages), title="Onboarding Guide")


def _docx(path: Path, blocks: Sequence[tuple[str, str]]) -> None:
    import docx

    document = docx.Document()
    for kind, text in blocks:
        if kind == "title":
            document.core_properties.title = text
            document.add_heading(text, level=0)
        elif kind == "h1":
            document.add_heading(text, level=1)
        else:
            document.add_paragraph(text)
    document.save(str(path))


def _xlsx(path: Path, sheets: dict[str, list[list[str]]]) -> None:
    import openpyxl

    book = openpyxl.Workbook()
    book.remove(book.active)
    for name, rows in sheets.items():
        sheet = book.create_sheet(name)
        for row in rows:
            sheet.append(row)
    book.save(str(path))


def write_corpus(folder: Path) -> Path:
    """The company's documents as real files under `folder` (md, txt, pdf, docx, html, xlsx)."""
    for name, content in FILES.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if name.endswith(".pdf"):
            path.write_bytes(_pdf(content))
        elif name.endswith(".docx"):
            _docx(path, content)
        elif name.endswith(".xlsx"):
            _xlsx(path, content)
        else:
            path.write_text(content, encoding="utf-8")
    return folder


def headings_and_questions() -> set[str]:
    """Lines that are never an answer: titles, headings, underlines and the question lines of the FAQ."""
    lines: set[str] = set()
    for name, content in FILES.items():
        if isinstance(content, str):
            for line in content.splitlines():
                stripped = line.strip()
                if (stripped.startswith("#") or stripped.startswith("Q:") or set(stripped) <= set("=-")
                        or re.match(r"<h\d>", stripped)):
                    lines.add(re.sub(r"<[^>]+>|^#+\s*", "", stripped).strip())
            first = content.strip().splitlines()[0]
            if not first.startswith("<"):
                lines.add(first.strip())  # a plain-text file's or setext title
        elif name.endswith(".docx"):
            lines.update(text for kind, text in content if kind != "p")
    return {norm(x) for x in lines if len(norm(x)) > 2}


@dataclass(frozen=True)
class Turn:
    message: str
    category: str                      # direct, heading, faq, table, pdf, follow-up, switch, off-topic, cross
    source: str | None = None          # the file that answers; None: the documents do not answer it
    contains: tuple[str, ...] = ()     # a right answer contains one of these (compared without spacing or case)
    page: int | None = None            # the PDF page the answer is on
    language: str = "en"


def T(message: str, category: str, source: str | None = None, *contains: str, page: int | None = None) -> Turn:
    return Turn(message, category, source, tuple(contains), page, detect(message))


def detect(text: str) -> str:
    if re.search(r"[\u3040-\u30ff\u4e00-\u9fff]", text):
        return "ja"
    if re.search(r"[\u0400-\u04ff]", text):
        return "ru"
    return "en"


VAC, EXP, REM = "handbook/vacation-policy.md", "handbook/expenses.md", "handbook/remote-work.md"
FAQ, PDF, TRV = "support/tidewatch-faq.txt", "people/onboarding.pdf", "finance/командировки.docx"
LVJ, SEC, OFF = "people/休暇規程.docx", "it/security-policy.html", "admin/offices.xlsx"

CONVERSATIONS: list[list[Turn]] = [
    [T("How many days of paid annual leave do full-time employees get?", "direct", VAC, "25 working days"),
     T("And contractors?", "follow-up", VAC, "not entitled to paid annual leave"),
     T("Can I bring my dog to the office?", "off-topic")],
    [T("How many unused vacation days can I carry over?", "heading", VAC, "Up to five unused days"),
     T("When do they expire?", "follow-up", VAC, "31 March"),
     T("What is the daily meal allowance on a business trip?", "switch", EXP, "60 euros")],
    [T("Сколько дней в неделю можно работать из дома?", "heading", REM, "до трёх дней в неделю"),
     T("Какая погода будет завтра в Москве?", "off-topic"),
     T("Какую технику выдаёт компания для работы из дома?", "switch", REM, "ноутбук и второй монитор")],
    [T("How often is the firmware updated?", "faq", FAQ, "every six weeks"),
     T("How long does the battery last?", "faq", FAQ, "18 months"),
     T("And how do I reset it?", "follow-up", FAQ, "ten seconds")],
    [T("大阪支社の電話番号は？", "table", OFF, "06-6345-7781"),
     T("支社長は誰ですか？", "follow-up", OFF, "田中"),
     T("福岡支社の住所を教えてください。", "table", OFF, "天神1-8-1")],
    [T("What is the phone number of the Berlin office?", "table", OFF, "+49 30 5557 1180"),
     T("Who manages the Manchester office?", "table", OFF, "Priya Shah"),
     T("What is the capital of Australia?", "off-topic")],
    [T("What is the hotel limit per night on business trips?", "cross", TRV, "7000"),
     T("And in Moscow?", "follow-up", TRV, "9000"),
     T("How many days of summer leave do employees of the Japan offices get?", "cross", LVJ, "連続5日間")],
    [T("What time should I arrive on my first day?", "pdf", PDF, "9:00", page=1),
     T("When must two-factor authentication be enabled?", "pdf", PDF, "within 24 hours", page=2),
     T("Who answers practical questions during the first month?", "pdf", PDF, "buddy", page=3)],
    [T("パスワードは何文字以上必要ですか？", "direct", SEC, "12文字以上"),
     T("端末をなくしたらどうすればいいですか？", "direct", SEC, "24時間以内"),
     T("東京の明日の天気は？", "off-topic")],
    [T("How long is parental leave?", "heading", VAC, "sixteen weeks"),
     T("Is a doctor's note needed for sick leave?", "switch", VAC, "after three consecutive days"),
     T("Сколько компенсируют за интернет?", "switch", REM, "1500 рублей")],
    [T("Какой лимит на гостиницу в командировке?", "direct", TRV, "7000 рублей"),
     T("А суточные?", "follow-up", TRV, "700 рублей"),
     T("В какой срок нужно сдать авансовый отчёт?", "heading", TRV, "трёх рабочих дней")],
    [T("Сколько длится гарантия на датчик Tidewatch?", "cross", FAQ, "two years"),
     T("Можно ли выгрузить измерения?", "cross", FAQ, "CSV"),
     T("Кто будет чемпионом мира по футболу?", "off-topic")],
    [T("USBメモリは使えますか？", "direct", SEC, "禁止"),
     T("How long until the screen locks automatically?", "cross", SEC, "5分"),
     T("What is the password length requirement?", "cross", SEC, "12文字以上")],
    [T("年末年始の休みはいつからいつまでですか？", "direct", LVJ, "12月29日から1月3日"),
     T("結婚したら何日休めますか？", "heading", LVJ, "結婚する場合は5日間"),
     T("What is the meal allowance for trips?", "switch", EXP, "60 euros")],
    [T("Which class are short flights booked in?", "heading", EXP, "economy class"),
     T("What about trains?", "follow-up", EXP, "standard class"),
     T("How do I make a good pizza dough?", "off-topic"),
     T("When are taxis reimbursed?", "switch", EXP, "between 22:00 and 06:00")],
    [T("Is the Tidewatch sensor waterproof?", "faq", FAQ, "IP68"),
     T("How deep?", "follow-up", FAQ, "two metres"),
     T("What does the warranty cover?", "faq", FAQ, "manufacturing defects")],
    [T("Где должны быть сотрудники с 11 до 16?", "heading", REM, "на связи в рабочем чате"),
     T("Какой курс доллара сегодня?", "off-topic"),
     T("Сколько дней отпуска у сотрудников в год?", "cross", VAC, "25 working days")],
    [T("Where are passwords stored?", "pdf", PDF, "password manager", page=2),
     T("What should I bring on my first day?", "pdf", PDF, "passport", page=1),
     T("When is the security training?", "pdf", PDF, "within the first two", page=3)],
    [T("How soon must expense claims be submitted?", "direct", EXP, "within 30 days"),
     T("When are they paid?", "follow-up", EXP, "next monthly salary"),
     T("Who was the first person on the Moon?", "off-topic")],
    [T("What is the address of the Tokyo head office?", "cross", OFF, "丸の内1-2-3"),
     T("ロンドンオフィスの電話番号は？", "cross", OFF, "+44 20 7946 0321"),
     T("夏休みは何日取れますか？", "heading", LVJ, "連続5日間")],
    [T("Do employees in the Osaka office follow this vacation policy?", "direct", VAC, "Japanese leave rules"),
     T("What is the summer leave there?", "cross", LVJ, "7月から9月"),
     T("Сколько стоит билет в кино?", "off-topic")],
    [T("How many days of sick leave at full pay are there?", "direct", VAC, "ten days"),
     T("Are part-time employees entitled to annual leave?", "direct", VAC, "in proportion"),
     T("How far ahead must leave be requested?", "direct", VAC, "two weeks in advance")],
]


def norm(text: str) -> str:
    return re.sub(r"\s+", " ", unicodedata.normalize("NFKC", text)).strip().lower()


def quoted_units(answer: str) -> list[str]:
    """The units an extractive answer quotes: the text before each [n] mark."""
    return [norm(u) for u in re.split(r"\s*\[\d+\]\s*", answer) if norm(u)]


@dataclass
class Record:
    turn: Turn
    conversation: int
    position: int
    answer: str
    sources: list[str]
    pages: list[Any]
    refused: bool
    statement_language_ok: bool
    contains: bool = False
    first: bool = False
    page_ok: bool = True
    quoted_heading: list[str] = field(default_factory=list)
    title_prefix: bool = False

    @property
    def right(self) -> bool:
        if self.turn.source is None:
            return self.refused and self.statement_language_ok
        return self.contains and self.first and self.page_ok and not self.quoted_heading and not self.title_prefix

    def to_dict(self) -> dict[str, Any]:
        return {"conversation": self.conversation, "position": self.position, "message": self.turn.message,
                "category": self.turn.category, "expected": self.turn.source, "answer": self.answer,
                "sources": self.sources, "pages": self.pages, "right": self.right, "contains": self.contains,
                "first": self.first, "refused": self.refused, "quoted_heading": self.quoted_heading,
                "title_prefix": self.title_prefix}


def ingest(wb: Any, folder: Path, site_id: str) -> None:
    report = wb.ingest_paths([write_corpus(folder)], site_id=site_id)
    counts = report.to_dict()
    assert counts["failed"] == 0, counts


def ask(wb: Any, site_id: str, conversations: Sequence[Sequence[Turn]] = CONVERSATIONS,
        session_prefix: str = "company") -> list[Record]:
    """Ask each conversation in its own session through wb.chat and judge every turn."""
    from rag_core.chat.prompts import labels

    bad_lines = headings_and_questions()
    titles = {norm(t) for t in ("Brightwater Analytics — Vacation and Leave Policy", "Expense Policy",
                                "Политика удалённой работы", "Onboarding Guide", "情報セキュリティ規程",
                                "Положение о служебных командировках", "日本オフィス休暇規程")}
    records: list[Record] = []
    for c, conversation in enumerate(conversations):
        session = f"{session_prefix}-{c}"
        wb.chat_reset(session)
        for p, turn in enumerate(conversation):
            result = wb.chat(turn.message, session_id=session, site_id=site_id)
            sources = [s.source for s in result.sources]
            statement = labels(turn.language)["no_context"]
            refused = not result.sources and result.answer.strip() == statement
            any_refusal = not result.sources and any(result.answer.strip() == labels(x)["no_context"]
                                                     for x in ("en", "ru", "ja"))
            rec = Record(turn, c, p, result.answer, sources, [s.page for s in result.sources],
                         refused=any_refusal, statement_language_ok=refused)
            if turn.source is not None:
                answer = norm(result.answer)
                rec.contains = any(norm(x) in answer for x in turn.contains)
                cited = [int(n) for n in re.findall(r"\[(\d+)\]", result.answer)]
                first_cited = next((s for s in result.sources if s.n == cited[0]), None) if cited else None
                rec.first = bool(first_cited and first_cited.source.endswith(turn.source))
                if turn.page is not None:
                    rec.page_ok = bool(first_cited and first_cited.page == turn.page)
                rec.quoted_heading = [u for u in quoted_units(result.answer) if u in bad_lines]
                rec.title_prefix = any(norm(result.answer).startswith(t) for t in titles)
            records.append(rec)
        wb.chat_reset(session)
    return records


def summary(records: Sequence[Record]) -> dict[str, Any]:
    """Per category: turns, right answers, right source first, off-topic refused; headings quoted overall."""
    out: dict[str, Any] = {}
    for category in sorted({r.turn.category for r in records}):
        rows = [r for r in records if r.turn.category == category]
        out[category] = {"turns": len(rows), "right": sum(r.right for r in rows),
                         "contains": sum(r.contains for r in rows if r.turn.source),
                         "first": sum(r.first for r in rows if r.turn.source),
                         "refused": sum(r.refused for r in rows)}
    answerable = [r for r in records if r.turn.source]
    out["all"] = {"turns": len(records), "right": sum(r.right for r in records),
                  "off_topic_answered": sum(not r.refused for r in records if r.turn.source is None),
                  "headings_quoted": sum(bool(r.quoted_heading) for r in answerable),
                  "title_prefixed": sum(r.title_prefix for r in answerable),
                  "answerable_refused": sum(r.refused for r in answerable)}
    return out
