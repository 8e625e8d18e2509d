"""Which User-Agents are bots: the test n8n 2.41.1 applies before a send-and-wait approval click
resumes an execution (n8n-nodes-base utils/sendAndWait `sendAndWaitWebhook`), so that a link
preview, a mail scanner or a headless browser cannot approve.

- `isbot` 3.6.13's patterns (the npm package n8n uses, in the public domain, copied here with its
  own amendments for a regex engine with lookbehind; Python's needs fixed-width lookbehinds, so
  its two alternations are written as two lookbehinds each);
- n8n's `isMicrosoftPreviewService`: no User-Agent at all, or one naming teams, skype or preview;
- and, ahead of every route, n8n's server answers 204 to a User-Agent holding "bot" (`bot`).
"""

from __future__ import annotations

import re

_PATTERNS = [
    r" daum[ /]",
    r" deusu/",
    r" yadirectfetcher",
    r"(?:^| )site",
    r"(?:^|[^g])news",
    r"@[a-z]",
    r"\(at\)[a-z]",
    r"\(github\.com/",
    r"\[at\][a-z]",
    r"^12345",
    r"^<",
    r"^[\w \.\-\(\)]+(/v?\d+(\.\d+)?(\.\d{1,10})?)?$",
    r"^[^ ]{50,}$",
    r"^active",
    r"^ad muncher",
    r"^amaya",
    r"^anglesharp/",
    r"^anonymous",
    r"^avsdevicesdk/",
    r"^axios/",
    r"^bidtellect/",
    r"^biglotron",
    r"^btwebclient/",
    r"^castro",
    r"^clamav[ /]",
    r"^client/",
    r"^cobweb/",
    r"^coccoc",
    r"^custom",
    r"^ddg[_-]android",
    r"^discourse",
    r"^dispatch/\d",
    r"^downcast/",
    r"^duckduckgo",
    r"^facebook",
    r"^fdm[ /]\d",
    r"^getright/",
    r"^gozilla/",
    r"^hatena",
    r"^hobbit",
    r"^hotzonu",
    r"^hwcdn/",
    r"^jeode/",
    r"^jetty/",
    r"^jigsaw",
    r"^linkdex",
    r"^lwp[-: ]",
    r"^metauri",
    r"^microsoft bits",
    r"^movabletype",
    r"^mozilla/\d\.\d \(compatible;?\)$",
    r"^mozilla/\d\.\d \w*$",
    r"^navermailapp",
    r"^netsurf",
    r"^offline explorer",
    r"^php",
    r"^postman",
    r"^postrank",
    r"^python",
    r"^read",
    r"^reed",
    r"^restsharp/",
    r"^snapchat",
    r"^space bison",
    r"^svn",
    r"^swcd ",
    r"^taringa",
    r"^test certificate info",
    r"^thumbor/",
    r"^tumblr/",
    r"^user-agent:mozilla",
    r"^valid",
    r"^venus/fedoraplanet",
    r"^w3c",
    r"^webbandit/",
    r"^webcopier",
    r"^wget",
    r"^whatsapp",
    r"^xenu link sleuth",
    r"^yahoo",
    r"^yandex",
    r"^zdm/\d",
    r"^zoom marketplace/",
    r"^{{.*}}$",
    r"adbeat\.com",
    r"appinsights",
    r"archive",
    r"ask jeeves/teoma",
    r"bit\.ly/",
    r"bluecoat drtr",
    r"bot",
    r"browsex",
    r"burpcollaborator",
    r"capture",
    r"catch",
    r"check",
    r"chrome-lighthouse",
    r"chromeframe",
    r"cloud",
    r"crawl",
    r"cryptoapi",
    r"dareboost",
    r"datanyze",
    r"dataprovider",
    r"dejaclick",
    r"dmbrowser",
    r"download",
    r"evc-batch/",
    r"feed",
    r"firephp",
    r"freesafeip",
    r"ghost",
    r"gomezagent",
    r"google",
    r"headlesschrome/",
    r"http",
    r"httrack",
    r"hubspot marketing grader",
    r"hydra",
    r"ibisbrowser",
    r"images",
    r"iplabel",
    r"ips-agent",
    r"java",
    r"library",
    r"mail\.ru/",
    r"manager",
    r"monitor",
    r"morningscore/",
    r"neustar wpm",
    r"nutch",
    r"offbyone",
    r"optimize",
    r"pageburst",
    r"pagespeed",
    r"perl",
    r"phantom",
    r"pingdom",
    r"powermarks",
    r"preview",
    r"proxy",
    r"ptst[ /]\d",
    r"reader",
    r"rexx;",
    r"rigor",
    r"rss",
    r"scan",
    r"scrape",
    r"search",
    r"serp ?reputation ?management",
    r"server",
    r"sogou",
    r"sparkler/",
    r"speedcurve",
    r"spider",
    r"splash",
    r"statuscake",
    r"stumbleupon\.com",
    r"supercleaner",
    r"synapse",
    r"synthetic",
    r"taginspector/",
    r"torrent",
    r"tracemyfile",
    r"transcoder",
    r"trendsmapresolver",
    r"twingly recon",
    r"url",
    r"virtuoso",
    r"wappalyzer",
    r"webglance",
    r"webkit2png",
    r"websitemetadataretriever",
    r"whatcms/",
    r"wordpress",
    r"zgrab",
]
# isbot's amend(): (the pattern it replaces, by its last occurrence; the replacement)
_AMENDED = (
    ("bot", r"(?<! cu)bot"),  # a Cubot phone
    ("google", r"(?<! channel/)(?<! google/)google(?!(?:app|/google| pixel))"),  # WebView
    ("http", r"(?<!lib)http"),  # the libhttp browser
    ("java", r"java(?!;)"),  # Java-based browsers
    ("search", r"(?<! ya)(?<! yayandex)search"),  # the Yandex search app
)


def _amended(patterns: list[str]) -> list[str]:
    patterns = list(patterns)
    for plain, amended in _AMENDED:
        index = len(patterns) - 1 - patterns[::-1].index(plain)
        patterns[index] = amended
    return patterns


# JavaScript's \w and \d are ASCII-only without the u flag: re.ASCII.
_ISBOT = re.compile("|".join(_amended(_PATTERNS)), re.IGNORECASE | re.ASCII)
_BOT_WORD = re.compile("bot", re.IGNORECASE)
_PREVIEWS = ("teams", "skype", "preview")


def is_bot(user_agent: str | None) -> bool:
    """isbot(ua): a crawler, a library, a headless browser..."""
    return bool(user_agent) and _ISBOT.search(user_agent or "") is not None


def says_bot(user_agent: str | None) -> bool:
    """n8n's server-wide filter (`isbot.spawn(["bot"])`): answered 204 on every path."""
    return bool(user_agent) and _BOT_WORD.search(user_agent or "") is not None


def ignored_click(user_agent: str | None) -> bool:
    """What n8n does not let resume an approval: a bot, or Microsoft's link preview service."""
    if not user_agent:
        return True
    lowered = user_agent.lower()
    return is_bot(user_agent) or any(word in lowered for word in _PREVIEWS)
