"""Every text the Slack bot posts, in Japanese, English and Russian, formatted as Slack mrkdwn.

The Japanese texts follow the requirement's output examples word for word ("クロール完了しました。",
"取り込みページ数: 15", "ナレッジベース統計:", "削除しました: <URL> (8チャンク)", ...); English and
Russian say the same.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, Sequence

from rag_core.search.types import Citation
from rag_core.chat.prompts import labels
from rag_core.textproc import detect_language

MAX_TEXT = 39_000          # Slack cuts a message's text at 40,000 characters
MAX_ERROR_LINES = 5        # failed pages listed under a crawl summary

TEXTS: dict[str, dict[str, str]] = {
    "ja": {
        "usage": "使い方:\n"
                 "• `@bot <質問>`: 取り込み済みの知識をもとに回答します（スレッドが1つの会話です）\n"
                 "• `@bot rag crawl <URL> [パターン]`: リンク集ページからクロール＆取り込み\n"
                 "• `@bot rag add <URL>`: 単一ページ取り込み\n"
                 "• `@bot rag status`: ナレッジベース統計表示\n"
                 "• `@bot rag delete <URL>`: ソースURL指定で削除\n"
                 "• `@bot rag search <キーワード>`: 検索\n"
                 "スラッシュコマンド: `/rag crawl|add|status|delete|search|ask ...`",
        "unknown": "不明なコマンドです: `{sub}`",
        "missing_url": "エラー: `rag {sub}` にはURLが必要です。例: `rag {sub} https://example.com/page`",
        "missing_text": "エラー: `rag {sub}` には{what}が必要です。例: `rag {sub} {example}`",
        "what_query": "検索語", "what_question": "質問",
        "example_query": "非同期処理", "example_question": "async/awaitとは？",
        "disabled": "エラー: RAG機能が無効です。管理者に連絡してください。",
        "not_admin": "エラー: crawl / add / delete は管理者のみ実行できます。管理者に依頼するか、"
                     "RAG_SLACK_ADMINS にあなたのユーザーID（{user}）を追加してもらってください。",
        "channel_denied": "エラー: このチャンネルではボットが有効になっていません。RAG_SLACK_CHANNELS に {channel} "
                          "を追加するよう管理者に依頼してください。",
        "no_site": "エラー: このワークスペース／チャンネルはどのサイトにも割り当てられていません。RAG_SLACK_SITE_MAP に "
                   "`{team}=<サイト>` または `{channel}=<サイト>` を追加するよう管理者に依頼してください。",
        "refused": "エラー: このURLはクロールポリシーにより拒否されました。\n{reason}",
        "crawl_accepted": "クロールを開始します: {url}{pattern}（バックグラウンドで実行し、進捗をこのスレッドに投稿します）",
        "add_accepted": "取り込みを開始します: {url}（結果をこのスレッドに投稿します）",
        "queued": "（待ち順: {n}番目）",
        "busy": "エラー: 実行待ちの取り込みが多すぎます（{n}件）。完了してから再度お試しください。",
        "duplicate": "エラー: {url} の取り込みはすでに実行中です。完了をお待ちください。",
        "pattern": "（パターン: `{pattern}`）",
        "progress": "進捗: {done} / {total} ページ",
        "progress_chunks": "（{chunks}チャンク）",
        "crawl_done": "クロール完了しました。\n取り込みページ数: {pages}{unchanged}\nチャンク数: {chunks}\nエラー: {errors}",
        "unchanged": "（うち変更なし {n}）",
        "errors_none": "0件",
        "errors_one_reason": "{n}件（{reason}）",
        "errors_reasons": "{n}件（{reasons}）",
        "no_links": "リンク集ページに、パターンと許可リストに合うリンクがありませんでした。",
        "add_done": "取り込みました: {url} ({chunks}チャンク)",
        "add_unchanged": "変更なし: {url}（取り込み済み）",
        "add_failed": "エラー: ページの取り込みに失敗しました。\nURL: {url}\n原因: {reason}",
        "crawl_failed": "エラー: クロールに失敗しました。\nURL: {url}\n原因: {reason}",
        "timeout": "接続がタイムアウトしました ({seconds}秒)",
        "status": "ナレッジベース統計:\n総チャンク数: {chunks}\nソースURL数: {urls}",
        "status_empty": "まだ何も取り込まれていません。`@bot rag add <URL>` または `@bot rag crawl <URL>` で追加してください。",
        "deleted": "削除しました: {url} ({chunks}チャンク)",
        "not_found": "エラー: {url} はナレッジベースにありません。取り込んだときと同じURLを指定してください。",
        "empty_index": "ナレッジベースはまだ空です。`@bot rag add <URL>` または `@bot rag crawl <URL>` で"
                       "ページを取り込んでから、もう一度質問してください。",
        "search_header": "「{query}」の検索結果: {n}件",
        "search_none": "「{query}」に一致する文書はありませんでした。",
        "asked": "<@{user}> の質問: {question}",
        "db_down": "エラー: ナレッジベースのデータベースに接続できません。PostgreSQL が動いていて DATABASE_URL が"
                   "正しいか確認してから、もう一度お試しください。",
        "failed": "エラー: {message}",
        "internal": "エラー: 処理に失敗しました（インシデント {incident}）。管理者はボットのログで確認できます。",
        "not_in_channel": "エラー: このチャンネルに投稿できません。`/invite @bot` でボットを招待してから、"
                          "もう一度お試しください。",
    },
    "en": {
        "usage": "Usage:\n"
                 "• `@bot <question>`: an answer from the knowledge base (a thread is one conversation)\n"
                 "• `@bot rag crawl <URL> [pattern]`: crawl an index page and ingest the pages it links to\n"
                 "• `@bot rag add <URL>`: ingest one page\n"
                 "• `@bot rag status`: knowledge base statistics\n"
                 "• `@bot rag delete <URL>`: delete a source URL\n"
                 "• `@bot rag search <words>`: search\n"
                 "Slash command: `/rag crawl|add|status|delete|search|ask ...`",
        "unknown": "Unknown command: `{sub}`",
        "missing_url": "Error: `rag {sub}` needs a URL, e.g. `rag {sub} https://example.com/page`",
        "missing_text": "Error: `rag {sub}` needs {what}, e.g. `rag {sub} {example}`",
        "what_query": "words to search for", "what_question": "a question",
        "example_query": "async tasks", "example_question": "what is async/await?",
        "disabled": "Error: the knowledge base (RAG) is disabled. Contact your administrator.",
        "not_admin": "Error: only admins may crawl, add and delete. Ask one of them, or ask the operator to add "
                     "your user id ({user}) to RAG_SLACK_ADMINS.",
        "channel_denied": "Error: the bot is not enabled in this channel; ask the operator to add {channel} to "
                          "RAG_SLACK_CHANNELS.",
        "no_site": "Error: this workspace and channel are not mapped to a site; ask the operator to add "
                   "`{team}=<site>` or `{channel}=<site>` to RAG_SLACK_SITE_MAP.",
        "refused": "Error: the crawl policy refused this URL.\n{reason}",
        "crawl_accepted": "Crawling {url}{pattern} in the background; progress follows in this thread.",
        "add_accepted": "Adding {url} in the background; the result follows in this thread.",
        "queued": " (number {n} in the queue)",
        "busy": "Error: too many crawls are waiting ({n}); try again when one has finished.",
        "duplicate": "Error: {url} is already being ingested; wait for it to finish.",
        "pattern": " (pattern `{pattern}`)",
        "progress": "Progress: {done} / {total} pages",
        "progress_chunks": " ({chunks} chunks)",
        "crawl_done": "Crawl finished.\nPages ingested: {pages}{unchanged}\nChunks: {chunks}\nErrors: {errors}",
        "unchanged": " ({n} unchanged)",
        "errors_none": "0",
        "errors_one_reason": "{n} ({reason})",
        "errors_reasons": "{n} ({reasons})",
        "no_links": "No link on the index page matched the pattern and the allowlist.",
        "add_done": "Added: {url} ({chunks} chunks)",
        "add_unchanged": "Unchanged: {url} (already up to date)",
        "add_failed": "Error: the page could not be ingested.\nURL: {url}\nReason: {reason}",
        "crawl_failed": "Error: the crawl failed.\nURL: {url}\nReason: {reason}",
        "timeout": "the connection timed out ({seconds} s)",
        "status": "Knowledge base statistics:\nTotal chunks: {chunks}\nSource URLs: {urls}",
        "status_empty": "Nothing is ingested yet: add pages with `@bot rag add <URL>` or `@bot rag crawl <URL>`.",
        "deleted": "Deleted: {url} ({chunks} chunks)",
        "not_found": "Error: {url} is not in the knowledge base; give the URL exactly as it was added.",
        "empty_index": "The knowledge base is empty: add pages with `@bot rag add <URL>` or `@bot rag crawl <URL>`, "
                       "then ask again.",
        "search_header": "{n} results for “{query}”",
        "search_none": "Nothing found for “{query}”.",
        "asked": "<@{user}> asked: {question}",
        "db_down": "Error: the knowledge base database is unreachable; check that PostgreSQL runs and DATABASE_URL "
                   "is right, then try again.",
        "failed": "Error: {message}",
        "internal": "Error: this request failed (incident {incident}); the operator finds it in the bot's log.",
        "not_in_channel": "Error: the bot cannot post in this channel; invite it with `/invite @bot` and try again.",
    },
    "ru": {
        "usage": "Как пользоваться:\n"
                 "• `@bot <вопрос>`: ответ по базе знаний (ветка — это один разговор)\n"
                 "• `@bot rag crawl <URL> [шаблон]`: обойти страницу-каталог и загрузить страницы по её ссылкам\n"
                 "• `@bot rag add <URL>`: загрузить одну страницу\n"
                 "• `@bot rag status`: статистика базы знаний\n"
                 "• `@bot rag delete <URL>`: удалить источник по URL\n"
                 "• `@bot rag search <слова>`: поиск\n"
                 "Слэш-команда: `/rag crawl|add|status|delete|search|ask ...`",
        "unknown": "Неизвестная команда: `{sub}`",
        "missing_url": "Ошибка: `rag {sub}` нужен URL, например `rag {sub} https://example.com/page`",
        "missing_text": "Ошибка: `rag {sub}` нужен {what}, например `rag {sub} {example}`",
        "what_query": "поисковый запрос", "what_question": "вопрос",
        "example_query": "асинхронные задачи", "example_question": "что такое async/await?",
        "disabled": "Ошибка: база знаний (RAG) отключена. Обратитесь к администратору.",
        "not_admin": "Ошибка: crawl, add и delete доступны только администраторам. Попросите одного из них или "
                     "попросите оператора добавить ваш id ({user}) в RAG_SLACK_ADMINS.",
        "channel_denied": "Ошибка: в этом канале бот не включён; попросите оператора добавить {channel} в "
                          "RAG_SLACK_CHANNELS.",
        "no_site": "Ошибка: это пространство и канал не привязаны к сайту; попросите оператора добавить "
                   "`{team}=<сайт>` или `{channel}=<сайт>` в RAG_SLACK_SITE_MAP.",
        "refused": "Ошибка: политика обхода отклонила этот URL.\n{reason}",
        "crawl_accepted": "Обход {url}{pattern} идёт в фоне; ход работы — в этой ветке.",
        "add_accepted": "Загрузка {url} идёт в фоне; результат — в этой ветке.",
        "queued": " (место в очереди: {n})",
        "busy": "Ошибка: в очереди слишком много загрузок ({n}); повторите, когда одна из них завершится.",
        "duplicate": "Ошибка: {url} уже загружается; дождитесь окончания.",
        "pattern": " (шаблон `{pattern}`)",
        "progress": "Ход работы: {done} / {total} страниц",
        "progress_chunks": " (фрагментов: {chunks})",
        "crawl_done": "Обход завершён.\nЗагружено страниц: {pages}{unchanged}\nФрагментов: {chunks}\nОшибки: {errors}",
        "unchanged": " (без изменений: {n})",
        "errors_none": "0",
        "errors_one_reason": "{n} ({reason})",
        "errors_reasons": "{n} ({reasons})",
        "no_links": "На странице-каталоге нет ссылок, подходящих под шаблон и список разрешённых доменов.",
        "add_done": "Добавлено: {url} (фрагментов: {chunks})",
        "add_unchanged": "Без изменений: {url} (уже загружена)",
        "add_failed": "Ошибка: не удалось загрузить страницу.\nURL: {url}\nПричина: {reason}",
        "crawl_failed": "Ошибка: обход не удался.\nURL: {url}\nПричина: {reason}",
        "timeout": "истекло время ожидания соединения ({seconds} с)",
        "status": "Статистика базы знаний:\nВсего фрагментов: {chunks}\nИсточников (URL): {urls}",
        "status_empty": "Пока ничего не загружено: добавьте страницы через `@bot rag add <URL>` или "
                        "`@bot rag crawl <URL>`.",
        "deleted": "Удалено: {url} (фрагментов: {chunks})",
        "not_found": "Ошибка: {url} нет в базе знаний; укажите URL точно так, как его добавляли.",
        "empty_index": "База знаний пуста: добавьте страницы через `@bot rag add <URL>` или `@bot rag crawl <URL>`, "
                       "затем спросите снова.",
        "search_header": "Результаты по запросу «{query}»: {n}",
        "search_none": "По запросу «{query}» ничего не найдено.",
        "asked": "<@{user}> спрашивает: {question}",
        "db_down": "Ошибка: база данных базы знаний недоступна; проверьте, что PostgreSQL запущен и DATABASE_URL "
                   "верен, и повторите.",
        "failed": "Ошибка: {message}",
        "internal": "Ошибка: запрос не выполнен (инцидент {incident}); оператор найдёт его в журнале бота.",
        "not_in_channel": "Ошибка: бот не может писать в этот канал; пригласите его командой `/invite @bot` и "
                          "повторите.",
    },
}

REASONS: dict[str, dict[str, str]] = {
    "ja": {"timeout": "タイムアウト", "http_status": "HTTPエラー", "refused": "拒否", "robots": "robots.txtで禁止",
           "too_large": "サイズ超過", "content_type": "非対応の形式", "network": "接続エラー",
           "extract": "本文抽出エラー", "ingest": "取り込みエラー"},
    "en": {"timeout": "timeout", "http_status": "HTTP error", "refused": "refused", "robots": "robots.txt",
           "too_large": "too large", "content_type": "unsupported type", "network": "network error",
           "extract": "no text extracted", "ingest": "ingest failed"},
    "ru": {"timeout": "тайм-аут", "http_status": "ошибка HTTP", "refused": "отказано", "robots": "запрет robots.txt",
           "too_large": "слишком большая", "content_type": "неподдерживаемый тип", "network": "сетевая ошибка",
           "extract": "текст не извлечён", "ingest": "ошибка загрузки"},
}


def text(language: str, key: str, **values: Any) -> str:
    """One of the bot's texts in a language (English for anything unknown), with its values filled in."""
    return TEXTS.get(language, TEXTS["en"])[key].format(**values)


def reply_language(message: str, fallback: str) -> str:
    """The language of a question or query when its script shows one, else the workspace's language."""
    found = detect_language(message or "")
    return found if found in TEXTS and _letters(message) >= 2 else fallback


def _letters(message: str) -> int:
    return sum(ch.isalpha() for ch in message or "")


# --------------------------------------------------------------------------- mrkdwn


def escape(value: str) -> str:
    """Slack's three control characters as entities, so user and document text cannot inject markup."""
    return value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def link(target: str, label: str | None = None) -> str:
    """A clickable link for an http(s) URL, else the path in code style."""
    if target.lower().startswith(("http://", "https://")):
        shown = escape((label or target).replace("|", "¦"))
        return f"<{escape(target).replace('|', '%7C')}|{shown}>" if label else f"<{escape(target)}>"
    return f"`{target.replace('`', 'ˋ')}`"


_BOLD = re.compile(r"\*\*(.+?)\*\*")
_MD_LINK = re.compile(r"\[([^\]\n]+)\]\((https?://[^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6}\s+(.+)$", re.M)


def markdown_to_mrkdwn(value: str) -> str:
    """An answer's Markdown (bold, links, headings) in Slack's mrkdwn, with &, < and > escaped."""
    links: list[str] = []

    def keep_link(match: re.Match[str]) -> str:
        links.append(link(match.group(2), match.group(1)))
        return f"\x00{len(links) - 1}\x00"

    out = escape(_MD_LINK.sub(keep_link, value))
    out = _BOLD.sub(r"*\1*", out)
    out = _HEADING.sub(r"*\1*", out)
    return re.sub(r"\x00(\d+)\x00", lambda m: links[int(m.group(1))], out)


def clip(value: str, limit: int = MAX_TEXT) -> str:
    """A message within Slack's length limit, cut with an ellipsis when longer."""
    return value if len(value) <= limit else value[: limit - 1].rstrip() + "…"


# --------------------------------------------------------------------------- replies


def source_line(source: Citation, language: str) -> str:
    """`1. <https://x|Title> (p. 3) · 92.1%`, then `· sites: a, b` when several sites hold the passage."""
    words = labels(language)
    page = f" ({words['page']} {source.page})" if source.page is not None else ""
    title = source.title.strip() if source.title and source.title.strip() != source.source else None
    sites = f" · {words['sites']}: {escape(', '.join(source.sites))}" if len(source.sites) > 1 else ""
    return f"{source.n}. {link(source.source, title)}{page} · {source.similarity_pct:.1f}%{sites}"


def answer(turn_answer: str, sources: Sequence[Citation], language: str, with_sources: bool = True) -> str:
    """The answer in mrkdwn, then the Sources block (it says so when there is none)."""
    words = labels(language)
    body = markdown_to_mrkdwn(turn_answer.strip())
    if not with_sources:
        return clip(body)
    listed = "\n".join(source_line(s, language) for s in sources) if sources else f"_{escape(words['none'])}_"
    return clip(f"{body}\n\n*{words['sources']}*\n{listed}")


def error_counts(errors: Sequence[dict[str, str]], language: str) -> str:
    """`2件（タイムアウト）`, `3 (timeout: 2, HTTP error: 1)` or `0`."""
    if not errors:
        return text(language, "errors_none")
    names = REASONS.get(language, REASONS["en"])
    counts = Counter(e.get("reason", "network") for e in errors)
    if len(counts) == 1:
        reason = next(iter(counts))
        return text(language, "errors_one_reason", n=len(errors), reason=names.get(reason, reason))
    reasons = ", ".join(f"{names.get(r, r)}: {n}" for r, n in counts.most_common())
    return text(language, "errors_reasons", n=len(errors), reasons=reasons)


def cause(reason: str, message: str, language: str, timeout_sec: float) -> str:
    """Why a page failed: a timeout in the user's words, anything else as the crawler said it."""
    if reason == "timeout":
        return text(language, "timeout", seconds=f"{timeout_sec:g}")
    return escape(message)


def crawl_summary(report: Any, language: str, timeout_sec: float) -> str:
    """The summary of `rag crawl` (pages, chunks, errors by reason), then up to five failed pages."""
    unchanged = text(language, "unchanged", n=report.unchanged) if report.unchanged else ""
    lines = [text(language, "crawl_done", pages=report.pages_ingested, unchanged=unchanged, chunks=report.chunks,
                  errors=error_counts(report.errors, language))]
    for err in report.errors[:MAX_ERROR_LINES]:
        lines.append(f"• {link(err['url'])}: {cause(err['reason'], err['message'], language, timeout_sec)}")
    if len(report.errors) > MAX_ERROR_LINES:
        lines.append(f"• … +{len(report.errors) - MAX_ERROR_LINES}")
    if report.pages_found == 0:
        lines.append(text(language, "no_links"))
    return clip("\n".join(lines))


def add_summary(report: Any, language: str, timeout_sec: float) -> str:
    """The result of `rag add`: added with its chunks, unchanged, or why it failed."""
    if report.errors and not report.pages_ingested:
        err = report.errors[0]
        return text(language, "add_failed", url=escape(err["url"]),
                    reason=cause(err["reason"], err["message"], language, timeout_sec))
    doc = report.documents[0]
    if doc["status"] == "unchanged":
        return text(language, "add_unchanged", url=escape(doc["url"]))
    return text(language, "add_done", url=escape(doc["url"]), chunks=doc["chunks"])


def status(info: dict[str, Any], language: str) -> str:
    """Knowledge base statistics: total chunks and source URLs (and how to start when it is empty)."""
    reply = text(language, "status", chunks=info["chunks"], urls=info["web_sources"])
    return reply + ("\n" + text(language, "status_empty") if not info["documents"] else "")


def search_results(response: dict[str, Any], language: str) -> str:
    """Search hits: numbered links with their highlighted fragment."""
    query = escape(response["query"])
    results = response.get("results") or []
    if not results:
        return text(language, "search_none", query=query)
    lines = [f"*{text(language, 'search_header', query=query, n=response['total_results'])}*"]
    for n, r in enumerate(results, 1):
        title = r.get("title") or None
        fragment = _marked(r)
        lines.append(f"{n}. {link(r['file_path'], title)}" + (f"\n>{fragment}" if fragment else ""))
    return clip("\n".join(lines))


def _marked(result: dict[str, Any]) -> str:
    """The first highlight with its matched terms in bold, escaped for Slack."""
    highlights = result.get("highlights") or []
    if not highlights:
        return ""
    fragment = highlights[0]
    spans = (result.get("highlight_spans") or [[]])[0]
    out, pos = [], 0
    for start, end in spans:
        out += [escape(fragment[pos:start]), "*", escape(fragment[start:end]), "*"]
        pos = end
    out.append(escape(fragment[pos:]))
    return " ".join("".join(out).split())
