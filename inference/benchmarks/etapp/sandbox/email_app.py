"""Email (spec section 1.2): one user's mailbox, read-only (a sent mail is not stored, as upstream)."""

from __future__ import annotations

import re

import pandas as pd

from inference.benchmarks.etapp.sandbox.bm25 import BM25Okapi, top_indices
from inference.benchmarks.etapp.sandbox.core import TIME_FORMAT, Env, contains, records

ADDRESS = re.compile(r"^[a-zA-Z0-9_.+-]+@[a-zA-Z0-9-]+\.[a-zA-Z0-9-.]+$")
TOP_K = 5


class Email:
    """Upstream's Email class: same method and parameter names, so Python words the errors."""

    TOOLS = ("send_email", "get_today_emails_until_now", "search_email_by_sender_and_receiver",
             "search_email_by_content")

    def __init__(self, env: Env) -> None:
        self._env = env
        self._emails = env.data.table(env.user, "emails")
        self._sent = pd.to_datetime(self._emails["timestamp"], format=TIME_FORMAT)

    def send_email(self, receiver, subject, content, attachments=None):
        # Upstream normalises before it validates (spec correction 6): the subject and then the
        # content are stripped before either is checked, every address before it is matched, and a
        # value that is no string fails inside the strip with Python's own message (the subject's
        # first when both are bad).
        subject, content = subject.strip(), content.strip()
        if not subject:
            return {"status": "failure", "message": "Subject cannot be empty."}
        if not content:
            return {"status": "failure", "message": "Content cannot be empty."}
        if isinstance(receiver, str):
            receiver = [receiver]
        elif not isinstance(receiver, list):
            return {"status": "failure", "message": "Email receiver should be a string or a list of strings."}
        receiver = [address.strip() for address in receiver]
        for address in receiver:
            if not ADDRESS.match(address):
                return {"status": "failure", "message": f"Invalid email address: {address}"}
        return {"status": "success", "message": f"The mail to {receiver} is send"}

    def get_today_emails_until_now(self):
        clock = self._env.clock
        today = contains(self._emails["timestamp"], clock.date) & (self._sent < clock.moment)
        return {"status": "success", "data": records(self._emails[today])}

    def search_email_by_sender_and_receiver(self, address):
        address = address.strip().lower()  # strip first: a non-string fails on `strip` (correction 6)
        involved = (contains(self._emails["sender"], address, case=False)
                    | contains(self._emails["receiver"], address, case=False))
        return {"status": "success", "data": records(self._emails[involved & (self._sent < self._env.clock.moment)])}

    def search_email_by_content(self, query):
        # The corpus holds every mail, future ones included (they shape the idf), as upstream.
        index = BM25Okapi([text.split(" ") for text in self._emails["content"]])
        past = (self._sent < self._env.clock.moment).tolist()
        best = top_indices(index.scores(query.split(" ")), TOP_K, past)
        # Newest first; a stable sort keeps equal timestamps in score order (spec correction 4).
        newest = sorted(best, key=lambda i: self._sent.iloc[i], reverse=True)
        return {"status": "success", "data": records(self._emails.iloc[newest])}
