"""Chat: persistent sessions, streamed answers, and a Sources panel under every answer."""

from __future__ import annotations

import uuid

import streamlit as st

import app_ui as ui

HISTORY_SHOWN = 100

wb = ui.wb()
site = ui.current_site()
if "chat_session" not in st.session_state:
    st.session_state.chat_session = uuid.uuid4().hex


def _pick_session() -> None:
    st.session_state.chat_session = st.session_state.chat_session_pick


def _new_session() -> None:
    st.session_state.chat_session = uuid.uuid4().hex


# ----- sidebar: sessions -----
stored = ui.call(ui.sessions, site, default=[]) or []
titles = {s["id"]: f"{s['title'] or 'Untitled'} · {s['messages']} msgs" for s in stored}
session_id = st.session_state.chat_session
if site is not None and session_id not in titles:
    current = ui.call(wb.get_session, session_id, default=None)
    if current is not None and current["site_id"] != site:
        # The site picker moved on: that conversation belongs to the other site, so a new one starts here.
        _new_session()
        session_id = st.session_state.chat_session
options = list(titles)
if session_id not in titles:
    options.insert(0, session_id)
    titles[session_id] = "New conversation"
st.session_state.chat_session_pick = session_id
with st.sidebar:
    st.subheader("Conversations")
    st.selectbox("Session", options, format_func=lambda sid: titles[sid], key="chat_session_pick",
                 on_change=_pick_session)
    left, right = st.columns(2)
    left.button("New", on_click=_new_session, icon=":material/add_comment:", width="stretch")
    if right.button("Reset", icon=":material/restart_alt:", width="stretch",
                    help="Forget this session: its messages are deleted."):
        if ui.call(wb.chat_reset, session_id) is not None:
            ui.invalidate()
            _new_session()
            st.rerun()
    answerer = ui.call(lambda: wb.llm.describe(), default=None)  # a bad RAG_LLM setting shows here, not as a trace
    if answerer:
        st.caption(f"Answers by `{answerer}`")

st.title("Chat")
info = ui.call(ui.status, site, default=None)
if info is not None and info["chunks"] == 0:
    ui.offer_sample_corpus("chat-sample")

# ----- the conversation so far (replayed from the database, sources included) -----
history = ui.call(wb.chat_history, session_id, limit=HISTORY_SHOWN, default=[]) or []
if not history:
    st.caption("Ask anything about your documents; every answer lists the passages it used. With the sample "
               "corpus try: *Which file types are supported?* or *How do I delete a document?*")
last_answer = max((i for i, m in enumerate(history) if m["role"] == "assistant"), default=-1)
for i, message in enumerate(history):
    if message["role"] not in ("user", "assistant"):
        continue
    with st.chat_message(message["role"]):
        st.markdown(message["content"])
        if message["role"] == "assistant":
            ui.sources_panel(message["sources"], message["content"], expanded=i == last_answer)

# ----- a new turn -----
prompt = st.chat_input("Ask about your documents")
if prompt:
    with st.chat_message("user"):
        st.markdown(prompt)
    with st.chat_message("assistant"):
        placeholder = st.empty()
        streamed: list[str] = []

        def on_token(piece: str) -> None:
            streamed.append(piece)
            placeholder.markdown("".join(streamed) + " ▌")

        with st.spinner("Searching the documents ..."):
            turn = ui.call(wb.chat, prompt, session_id=session_id, site_id=site, on_token=on_token)
        if turn is None:
            placeholder.empty()
        else:
            placeholder.markdown(turn.answer)
            if turn.flags.get("no_index"):
                st.page_link("app_pages/ingestion.py", label="Go to Ingestion to add documents",
                             icon=":material/upload_file:")
            else:
                ui.invalidate()  # the session list and retention counts changed
                st.rerun()  # replays the turn from the database, sources included, and retitles the session
