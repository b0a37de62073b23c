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
names = {s["id"]: s["title"] or "Untitled" for s in stored}
titles = {s["id"]: f"{names[s['id']]} · {ui.plural(s['messages'], 'message')}" for s in stored}
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
    left.button("New", on_click=_new_session, icon=":material/add_comment:", width="stretch", key="chat_new")
    stored_session = session_id in {s["id"] for s in stored}
    if right.button("Reset", icon=":material/restart_alt:", width="stretch", key="chat_reset",
                    disabled=not stored_session, help="Delete this conversation and its messages (asks first)."):
        st.session_state.chat_confirm_reset = session_id
    if st.session_state.get("chat_confirm_reset") == session_id:
        st.warning(f"Delete **{ui.md_text(names[session_id])}** and its messages for good?", icon=":material/warning:")
        yes, no = st.columns(2)
        if yes.button("Delete", type="primary", key="chat_reset_yes", width="stretch"):
            st.session_state.pop("chat_confirm_reset", None)
            if ui.call(wb.chat_reset, session_id) is not None:
                ui.toast_next("Conversation deleted; a new one starts here.")
                _new_session()
                ui.after_write()
        if no.button("Cancel", key="chat_reset_no", width="stretch"):
            st.session_state.pop("chat_confirm_reset", None)
            st.rerun()
    if stored_session:
        # Only the open conversation: a picker of its own could point at another one than the one on screen.
        with st.expander("Rename or delete this conversation", icon=":material/edit_note:"):
            stored_title = next(s["title"] or "" for s in stored if s["id"] == session_id)
            new_title = st.text_input("New title", value=stored_title, key=f"chat_title_{session_id}",
                                      max_chars=200)
            if st.button("Rename", key="chat_rename", icon=":material/edit:",
                         disabled=not new_title.strip() or new_title.strip() == stored_title):
                if ui.call(wb.rename_session, session_id, new_title) is not None:
                    ui.toast_next(f"Renamed to '{ui.md_text(new_title.strip())}'.")
                    ui.after_write()
            sure = st.checkbox("Delete it and its messages for good", key=f"chat_delete_sure_{session_id}")
            if st.button("Delete conversation", key="chat_delete", type="primary", disabled=not sure,
                         icon=":material/delete:"):
                if ui.call(wb.chat_reset, session_id, missing_ok=False) is not None:
                    ui.toast_next(f"Deleted '{ui.md_text(names[session_id])}'.")
                    _new_session()
                    ui.after_write()
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
        st.markdown(ui.answer_markdown(message["content"]))
        if message["role"] == "assistant":
            ui.sources_panel(message["sources"], message["content"], expanded=i == last_answer)

# ----- a new turn -----
prompt = st.chat_input("Ask about your documents")
if prompt:
    with st.chat_message("user"):
        st.markdown(ui.answer_markdown(prompt))
    with st.chat_message("assistant"):
        placeholder = st.empty()
        streamed: list[str] = []

        def on_token(piece: str) -> None:
            streamed.append(piece)
            placeholder.markdown(ui.answer_markdown("".join(streamed)) + " ▌")

        with st.spinner("Searching the documents ..."):
            turn = ui.call(wb.chat, prompt, session_id=session_id, site_id=site, on_token=on_token)
        if turn is None:
            placeholder.empty()
        else:
            placeholder.markdown(ui.answer_markdown(turn.answer))
            if turn.flags.get("no_index"):
                st.page_link("app_pages/ingestion.py", label="Go to Ingestion to add documents",
                             icon=":material/upload_file:")
            else:
                ui.invalidate()  # the session list and retention counts changed
                st.rerun()  # replays the turn from the database, sources included, and retitles the session
