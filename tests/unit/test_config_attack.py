"""Regressions of an attack on the configuration and decoding surface (session 26): each bad
input is a typed error at construction that names the parameter, never an untyped exception
later, and nothing a user wrote is silently dropped."""

from __future__ import annotations

import ssl
from pathlib import Path
from urllib.parse import urlencode

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.examples import examples
from tests.support.self_signed import self_signed_cert
from tubemq_aio import ClientBalancedConsumer, Consumer, Producer, tdmsg
from tubemq_aio.checks import Checks, iana_zone, integer_of_text, number_of_text
from tubemq_aio.config import ClientConfig, HostPort, host_problem, parse_masters, redact_url
from tubemq_aio.consumer.config import ConsumerConfig
from tubemq_aio.errors import ConfigError, TDMsgError
from tubemq_aio.producer.config import ProducerConfig

M = parse_masters("h:1")

# ---- numbers Python lets through, or cannot print --------------------------------------------


def test_an_integer_too_long_to_print_is_a_config_error() -> None:
    # repr() of an int over 4300 digits raises ValueError: it was the error a user saw
    with pytest.raises(ConfigError, match=r"max_in_flight must be .* an integer of 16610 bits"):
        ProducerConfig(masters=M, max_in_flight=10**5000)


def test_an_integer_past_float_range_is_a_config_error() -> None:
    # float(10**400) raises OverflowError
    with pytest.raises(ConfigError, match=r"rpc_timeout must be in \[3, 600\] seconds"):
        ProducerConfig(masters=M, rpc_timeout=10**400)


@pytest.mark.parametrize("text", ["1_000", "٣", "１２", "0x10", "", " ", "9" * 5000, "+", "1 2"])
def test_integer_text_takes_ascii_digits_only(text: str) -> None:
    assert integer_of_text(text) is None
    checks = Checks("opts")
    checks.integer_text("n", text, low=0)
    with pytest.raises(ConfigError, match="opts: n must be an integer"):
        checks.done()


@pytest.mark.parametrize("text", ["1_0", "٣", "1e", ".", "0x1p3", "", "5;x"])
def test_number_text_takes_ascii_numbers_only(text: str) -> None:
    assert number_of_text(text) is None
    checks = Checks("opts")
    checks.number_text("n", text, low=0, high=100)
    with pytest.raises(ConfigError, match="opts: n must be a number"):
        checks.done()


def test_text_numbers_that_are_numbers() -> None:
    assert [integer_of_text(t) for t in (" 12 ", "-3", "+7", "007")] == [12, -3, 7, 7]
    assert [number_of_text(t) for t in ("2.5", " 1e3 ", "-.5", "5.")] == [2.5, 1000.0, -0.5, 5.0]


@pytest.mark.parametrize("method", ["integer_text", "number_text", "flag_text"])
def test_text_checks_refuse_a_value_that_is_not_text(method: str) -> None:
    checks = Checks("opts")
    if method == "flag_text":
        checks.flag_text("n", None)  # type: ignore[arg-type]
    else:
        getattr(checks, method)("n", None, low=0, high=1)
    with pytest.raises(ConfigError, match="opts: n must be"):
        checks.done()


@pytest.mark.parametrize("zone", ["America", "Europe", "A" * 300, "UTC\x00"])
def test_a_zone_name_the_resolver_cannot_open_is_no_zone(zone: str) -> None:
    # "America" is a directory of the zone database (IsADirectoryError), 300 characters a
    # name too long for a file (OSError): both escaped as untyped errors
    assert iana_zone(zone) is None
    checks = Checks("opts")
    checks.time_zone("zone", zone)
    with pytest.raises(ConfigError, match="zone must be an IANA time zone"):
        checks.done()


# ---- master addresses --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("masters", "problem"),
    [
        ("h1:8715,,h2:8715", "entry 2 of 3 is blank"),
        ("h1:8715,", "entry 2 of 2 is blank"),
        (",h1:8715", "entry 1 of 2 is blank"),
        (["h1:8715", " "], "entry 2 of 2 is blank"),
    ],
)
def test_a_blank_master_entry_is_refused(masters: str | list[str], problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        parse_masters(masters)
    with pytest.raises(ConfigError, match=problem):
        ProducerConfig(masters=masters)  # type: ignore[arg-type]


def test_a_set_of_masters_is_refused_for_its_order() -> None:
    with pytest.raises(ConfigError, match="not a set: masters are tried in order"):
        parse_masters({"h1:8715", "h2:8715"})


@pytest.mark.parametrize(
    ("host", "problem"),
    [
        ("h\x00", "a character no host name has"),
        ("h#x", "a character no host name has"),
        ("*", "a character no host name has"),
        ("..", "an empty label"),
        ("a..b", "an empty label"),
        ("a" * 64 + ".example", "one over 63 characters"),
        (".".join(["a" * 60] * 5), "is over 253"),
        ("256.1.1.1", "not a valid IPv4 address"),
    ],
)
def test_a_host_no_resolver_takes_is_refused_at_construction(host: str, problem: str) -> None:
    # before: accepted, then the first connect failed (a 64-character label even with a
    # UnicodeError from the IDNA codec, not a typed error)
    assert problem in (host_problem(host) or "")
    with pytest.raises(ConfigError, match=r"masters: address .*host"):
        ProducerConfig(masters=f"{host}:8715")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="client_host: host"):
        ProducerConfig(masters=M, client_host=host)
    with pytest.raises(ConfigError, match="tls_server_hostname: host"):
        ProducerConfig(masters=M, tls_server_hostname=host)


@pytest.mark.parametrize(
    "host", ["broker_1", "hé.example", "fe80::1%eth0", "10.0.0.1", "host.", "a" * 63, "1.2.3"]
)
def test_hosts_a_resolver_takes_are_kept(host: str) -> None:
    assert host_problem(host) is None
    assert parse_masters([f"[{host}]:1" if ":" in host else f"{host}:1"]) == (HostPort(host, 1),)


@settings(max_examples=examples(300), deadline=None)
@given(st.one_of(st.text(max_size=40), st.lists(st.text(max_size=20), max_size=4)))
def test_any_master_text_is_parsed_or_a_config_error(masters: str | list[str]) -> None:
    try:
        parsed = parse_masters(masters)
    except ConfigError:
        return
    assert parsed
    assert all(host_problem(a.host) is None and 1 <= a.port <= 65535 for a in parsed)


# ---- URLs ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "query",
    [
        "max_in_flight=1_000",
        "max_in_flight=٣",
        "rpc_timeout=1_0",
        "readTimeout=" + "9" * 5000,  # was an untyped ValueError (int's 4300-digit limit)
        "readTimeout=٣٠٠٠",
    ],
)
def test_url_numbers_are_ascii_digits(query: str) -> None:
    with pytest.raises(ConfigError, match=r"option '\w+' (has an invalid value|needs an integer)"):
        ProducerConfig.from_url(f"tubemq://h:1?{query}")


@pytest.mark.parametrize(
    "url",
    [
        "tubemqs://h:1?tls=false",
        "tubemqs://h:1?tlsEnable=false",
        "tubemq://h:1?tls=true&tlsEnable=false",
    ],
)
def test_a_url_asking_for_tls_and_refusing_it_is_refused(url: str) -> None:
    # before: the scheme won silently (TLS on although tls=false said off)
    with pytest.raises(ConfigError, match="both asks for TLS and refuses it"):
        ProducerConfig.from_url(url)


def test_tls_true_keeps_the_context_of_the_tls_files(tmp_path: Path) -> None:
    # before: tls=true replaced the CA file's context with the default one (the CA was lost)
    cert, _ = self_signed_cert(tmp_path)
    config = ProducerConfig.from_url(f"tubemq://h:1?CACertFile={cert}&tls=true")
    assert isinstance(config.ssl_context, ssl.SSLContext)
    assert len(config.ssl_context.get_ca_certs()) == 1
    with pytest.raises(ConfigError, match=r"both asks for TLS and refuses it \(CACertFile"):
        ProducerConfig.from_url(f"tubemq://h:1?CACertFile={cert}&tls=false")
    with pytest.raises(ConfigError, match="option 'tls' given twice"):
        ProducerConfig.from_url("tubemq://h:1?tls=true&tls=true")


@pytest.mark.parametrize("url", ["tubemq://h:1", "tubemq://h:1?topic=t"])
def test_a_required_option_missing_from_a_url_is_named(url: str) -> None:
    # before: TypeError (ConsumerConfig.__init__() missing ... argument: 'group')
    with pytest.raises(ConfigError, match="option 'group' is required"):
        ConsumerConfig.from_url(url)


def test_a_port_too_long_to_read_is_an_invalid_port() -> None:
    with pytest.raises(ConfigError, match="has an invalid port"):
        parse_masters("h:" + "9" * 5000)


def test_credentials_given_twice_in_a_url_are_refused() -> None:
    # before: authUserName/authPassword silently replaced the user info's credentials
    with pytest.raises(ConfigError, match="option 'credentials' given twice") as info:
        ClientConfig.from_url("tubemq://u:s3cret@h:1?authUserName=x&authPassword=other")
    assert "s3cret" not in str(info.value)
    assert "other" not in str(info.value)


BOUND = "tubemq://h:1?group=g1&topic=t&bound_source_count=1"


@pytest.mark.parametrize(
    ("query", "problem"),
    [
        ("&bound_session_key=k&bound_offsets=1:t:0@1,1:t:0@2", "names '1:t:0' twice"),
        ("&bound_session_key=k&sessionKey=j", "'sessionKey' and 'bound_session_key' both"),
        ("&bound_session_key=k&bound_session_key=j", "'bound_session_key' given twice"),
        ("&bound_session_key=k&bound_sesion_key=j", "unknown option 'bound_sesion_key'"),
    ],
)
def test_bound_consumption_in_a_url_says_each_thing_once(query: str, problem: str) -> None:
    # before: the last offset of a partition, or one of the two keys, won silently; a
    # misspelt bound_ key was not named
    with pytest.raises(ConfigError, match=problem):
        ConsumerConfig.from_url(BOUND + query)


_QUERY_KEYS = st.sampled_from(
    [
        "rpc_timeout",
        "max_in_flight",
        "tls",
        "tlsEnable",
        "readTimeout",
        "group",
        "topic",
        "topics",
        "filters",
        "consumePosition",
        "bound_session_key",
        "bound_source_count",
        "bound_offsets",
        "authUserName",
        "authPassword",
        "nope",
    ]
)


@settings(max_examples=examples(300), deadline=None)
@given(
    st.lists(st.tuples(_QUERY_KEYS, st.text(max_size=12)), max_size=6),
    st.sampled_from(["tubemq://h:1", "tubemqs://h:1", "h:1", "tubemq://u:p@h:1"]),
)
def test_any_url_query_is_a_config_or_a_config_error(
    pairs: list[tuple[str, str]], base: str
) -> None:
    url = f"{base}?{urlencode(pairs)}"
    try:
        config = ConsumerConfig.from_url(url)
    except ConfigError:
        return
    assert config.group  # the URL named a group, else the error said it is required


# ---- tdmsg arguments --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "attributes", [{"msgEnType": 1}, {"msgEnType": None}, {1: "1"}, {"compressType": 2}]
)
def test_decode_message_attributes_must_map_text_to_text(attributes: dict[object, object]) -> None:
    # before: AttributeError ('int' object has no attribute 'strip'), or a non-str key kept
    with pytest.raises(ConfigError, match="tdmsg: attributes must map str to str"):
        tdmsg.decode_message(b"x", attributes)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("options", "name"),
    [
        ({"compress_type": None}, "compress_type"),
        ({"compress_type": True}, "compress_type"),
        ({"group_id": 5}, "group_id"),
        ({"stream_id": b"s"}, "stream_id"),
    ],
)
def test_decode_pb_options_are_checked(options: dict[str, object], name: str) -> None:
    with pytest.raises(ConfigError, match=f"tdmsg: {name} must be a str"):
        tdmsg.decode_pb(b"", **options)  # type: ignore[arg-type]


def test_decode_pb_takes_the_number_of_a_compress_type() -> None:
    assert tdmsg.decode_pb(b"", compress_type=0) == []
    with pytest.raises(TDMsgError, match="gzip"):
        tdmsg.decode_pb(b"junk", compress_type=1)


# ---- secrets and separators in a URL ----------------------------------------------------------


@pytest.mark.parametrize("secret", ["pa#ss", "pa/ss", "pa?ss"])
def test_an_unencoded_password_character_is_named_without_the_password(secret: str) -> None:
    # before: "URL 'tubemq://u:pa#ss@h:1' must not have a path..." showed the password whole,
    # and "unknown option 'ss@h:1'" a part of it
    with pytest.raises(ConfigError, match="percent-encode") as info:
        ProducerConfig.from_url(f"tubemq://user:{secret}@h:1")
    assert secret not in str(info.value)
    assert "ss@" not in str(info.value)
    assert redact_url(f"tubemq://user:{secret}@h:1") == "tubemq://***@h:1"


def test_an_at_sign_in_a_query_value_is_no_user_info() -> None:
    url = "tubemq://h:1?bound_offsets=1:t:0@280"
    assert redact_url(url) == url


@pytest.mark.parametrize("masters", ["h1:8715 h2:8715", "h1 h2", "h1:8715;h2:8715"])
def test_masters_separated_by_spaces_are_told_to_use_commas(masters: str) -> None:
    # before: "write an IPv6 address with a port as [ip]:port", for two IPv4 addresses
    with pytest.raises(ConfigError, match="separate addresses with ','"):
        parse_masters(masters)


@pytest.mark.parametrize(
    ("address", "problem"),
    [
        (HostPort(5, "x"), "host must be a string, got int"),  # type: ignore[arg-type]
        (HostPort("h\x00", 1), "a character no host name has"),
        (HostPort("[::1]", 1), "a character no host name has"),  # kept without brackets
        (HostPort("h", 0), r"port must be an integer in \[1, 65535\], got 0"),
        (HostPort("h", True), "port must be an integer .* got bool"),
    ],
)
def test_a_host_port_given_as_is_is_checked_too(address: HostPort, problem: str) -> None:
    # before: kept unchecked (HostPort(5, "x") failed at the first connect)
    with pytest.raises(ConfigError, match=problem):
        ProducerConfig(masters=address)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=problem):
        parse_masters([HostPort("ok", 1), address])


@pytest.mark.parametrize("cls", [ClientConfig, ProducerConfig, ConsumerConfig])
def test_an_unknown_keyword_of_from_url_is_a_config_error(cls: type[ClientConfig]) -> None:
    # before: TypeError (__init__() got an unexpected keyword argument 'bogus')
    with pytest.raises(ConfigError, match=r"from_url: unknown option\(s\) 'bogus'"):
        cls.from_url("tubemq://h:1?group=g1&topic=t", bogus=1)  # type: ignore[call-arg]


@pytest.mark.parametrize("cls", [Consumer, ClientBalancedConsumer, Producer])
def test_an_unknown_keyword_of_a_clients_from_url_is_named(cls: type[Producer]) -> None:
    # before (the consumers): "pass either config= or masters, group, topics and options, not
    # both", as the unknown name fell through to the constructor's options
    with pytest.raises(ConfigError, match=r"from_url: unknown option\(s\) 'bogus'"):
        cls.from_url("tubemq://h:1?group=g1&topic=t1", bogus=1)  # type: ignore[call-arg]


def test_a_consumers_own_keywords_still_pass_through_from_url() -> None:
    def assigned(keys: object) -> None:
        del keys

    url = "tubemq://h:1?group=g1&topic=t1"
    assert Consumer.from_url(url, on_assigned=assigned).on_assigned is assigned
    placed = ClientBalancedConsumer.from_url(url, source_count=2, node_id=1)
    assert (placed.source_count, placed.node_id) == (2, 1)


def test_a_view_of_wider_items_is_read_as_its_bytes() -> None:
    # before: detect_format counted 2-byte items, so decode_message returned this InLongMsg
    # body as one RAW record while decode() decoded it
    body = b"\x0f\x00" + b"\x00\x00\x00\x00" + b"\x0f\x00"
    view = memoryview(body).cast("H")
    assert tdmsg.detect_format(view) is tdmsg.TDFormat.V0
    assert tdmsg.decode_message(view, None) == tdmsg.decode(body) == []


def test_client_host_is_no_ipv6_address() -> None:
    # before: accepted, and put into the client id and hostName, whose ':' separates fields
    with pytest.raises(ConfigError, match="client_host '::1' is an IPv6 address"):
        ProducerConfig(masters=M, client_host="::1")
    assert ProducerConfig(masters=M, client_host="10.0.0.7").client_host == "10.0.0.7"


@pytest.mark.parametrize("topics", ["t1,,t2", "t1,", ",t1"])
def test_a_blank_topic_in_a_comma_list_is_refused(topics: str) -> None:
    # before: dropped silently from keywords ("t1,,t2" was two topics) while the same list in
    # a URL was refused
    with pytest.raises(ConfigError, match="topics must not contain a blank name"):
        ProducerConfig(masters=M, topics=topics)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="topics must not contain a blank name"):
        ConsumerConfig(masters=M, group="g1", topics=topics)  # type: ignore[arg-type]
    assert ProducerConfig(masters=M, topics="").topics == ()  # type: ignore[arg-type]


def test_client_host_holds_no_underscore() -> None:
    # the broker derives "ip#pid" from the consumer id after its last '_'
    with pytest.raises(ConfigError, match="client_host 'my_host' holds '_'"):
        ConsumerConfig(masters=M, group="g1", topics="t", client_host="my_host")  # type: ignore[arg-type]


@pytest.mark.parametrize("topic", ["t\x00t", "tt\x1b", "t\x7ft"])
async def test_a_topic_with_a_control_character_is_refused_where_it_is_named(topic: str) -> None:
    # before: accepted, and a start or a publish failed later with "not deployed" (the master
    # creates no topic with such a name)
    problem = "contains a control character"
    with pytest.raises(ConfigError, match=problem):
        ConsumerConfig(masters=M, group="g1", topics=[topic])  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=problem):
        ProducerConfig(masters=M, topics=(topic,))
    with pytest.raises(ConfigError, match=problem):
        await Producer("h:1").publish(["ok", topic])


def test_a_plus_is_literal_in_the_user_info_and_a_space_in_the_query() -> None:
    # as documented in docs/api.md: the query is form-encoded (as the Go client's
    # url.ParseQuery reads it), the user info is not
    def password(url: str) -> str:
        credentials = ClientConfig.from_url(url).credentials
        assert credentials is not None
        return credentials.password

    assert password("tubemq://u:a+b@h:1") == "a+b"
    assert password("tubemq://h:1?authUserName=u&authPassword=a%2Bb") == "a+b"
    assert password("tubemq://h:1?authUserName=u&authPassword=a+b") == "a b"
