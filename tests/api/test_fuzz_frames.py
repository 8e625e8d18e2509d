"""Property-based fuzzing of chat WebSocket frames (replies to a Chat node), with the budget and
the bodies of the HTTP body fuzzing (tests/api/test_fuzz_bodies.py), through the socket's own
reading of a frame: every frame is a reply or a 4xx ApiError whose message becomes an error frame,
never another exception (which would drop the socket), and a refusal stores nothing."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from api.chat_replies import parse_reply
from api.errors import ApiError
from core.settings import Settings
from tests.api.test_fuzz_bodies import CHAT_BODIES, FUZZ, VALUES, _encode

FILES = st.lists(
    st.fixed_dictionaries(
        {},
        optional={
            "name": st.one_of(st.text(max_size=8), VALUES),
            "type": st.sampled_from(["text/plain", "image/png", "application/x-msdownload", 7]),
            "data": st.one_of(st.just("data:text/plain;base64,eHg="), VALUES),
        },
    ),
    max_size=3,
)
FRAMES = st.one_of(
    CHAT_BODIES,
    st.builds(
        lambda body, files: _encode({**body, "files": files}),
        st.fixed_dictionaries({"action": st.just("sendMessage"), "chatInput": st.text()}),
        st.one_of(FILES, VALUES),
    ),
)


@FUZZ
@given(frame=FRAMES)
def test_any_frame_is_a_reply_or_a_4xx_error_frame_and_never_drops_the_socket(
    redis_client, keys, frame
):
    try:
        body = parse_reply(frame, Settings(), allowed_file_types=["text/*"])
    except ApiError as err:
        assert 400 <= err.status < 500 and err.message, frame[:200]
        assert list(redis_client.scan_iter(match=f"{keys.prefix}*")) == []  # nothing stored
        return
    assert body is None or (body["action"] == "sendMessage" and isinstance(body["chatInput"], str))
