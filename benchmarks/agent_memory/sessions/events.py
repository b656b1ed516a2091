"""One-off events: what happens once and is asked about later.

Text is in the user's voice with pronoun slots, rendered first person in a
dialogue ("I went", "my") and third person in the agent's notes ("Maya
went", "her"): {U} subject at first mention (I / Maya), {u} later (I / she),
{Su} later at a sentence start (I / She), {me} (me / her), {my} (my / her),
{My}, {is} (am / is), {has} (have / has), {s} (verb ending: '' / 's').
" || " splits a story into turns (the agent asks in between in a dialogue).
Questions name the user: {Name}, {she}, {her} (possessive), {him} (object).
`single` questions ask for the fact; `para` ones ask for it in other words
(few shared words).
Slots name a pool in pools.py; {x[field]} reads a field of a pool entry.
"""

from typing import Any

EVENTS: dict[str, dict[str, Any]] = {
    "trip": {
        "category": "trips", "slots": {"c": "cities", "friend": "friend"},
        "label": ["weekend in {c[name]}", "{c[name]} trip", "back from {c[name]}"],
        "tags": ["travel"],
        "text": [
            "{U} spent the long weekend in {c[name]} with {friend}. {We} stayed in a tiny flat "
            "near {c[sight]} and mostly walked everywhere. || The highlight was {c[food]} at "
            "a place the landlady recommended; the low point was the four-hour delay on the "
            "way back. {Su} would go again, but not in August.",
            "Just got back from {c[name]}. {friend} had a conference there, so {U} tagged "
            "along and explored on {my} own during the day. || {Su} climbed up to "
            "{c[sight]} on the first morning and got completely lost on the way down, which "
            "turned out to be the best part. Ate {c[food]} three days running.",
            "Quick trip to {c[name]} to see {friend}, who moved there last year. || "
            "It rained the whole first day, so {we} hid in cafes and a bookshop. Sunday was "
            "clear and {we} did {c[sight]} properly. {Su} came back with a bag of {c[food]} "
            "as a souvenir.",
        ],
        "single": ["Who did {Name} go to {c[name]} with?",
                   "What food did {Name} mention from the {c[name]} trip?",
                   "When did {Name} go to {c[name]}?"],
        "para": ["Which city did {Name} visit with {friend}?"],
    },
    "restaurant": {
        "category": "restaurants", "slots": {"r": "restaurants", "friend": "friend"},
        "label": ["dinner at {r[name]}", "{r[name]} with {friend}"],
        "tags": ["food"],
        "text": [
            "{U} went to {r[name]} for {friend}'s birthday dinner. It's a {r[cuisine]} place "
            "that opened a few months ago. || The {r[dish]} was the best thing {U} ate all "
            "month, though the service was painfully slow and the bill came to more than "
            "expected. {Su} would go back for the food alone.",
            "Tried {r[name]} at last, the {r[cuisine]} restaurant {friend} keeps going on "
            "about. || Verdict: the {r[dish]} lived up to the hype, the desserts did not. "
            "{We} sat outside until they started stacking the chairs.",
            "Dinner out with {friend} at {r[name]}. {Su} had booked weeks ago. || "
            "{r[cuisine]} food, small plates, loud music. {Su} ordered the {r[dish]} twice "
            "because the first portion was tiny.",
        ],
        "single": ["What did {Name} order at {r[name]}?",
                   "Who did {Name} have dinner with at {r[name]}?"],
        "para": ["What was the best thing {Name} ate when eating out with {friend}?"],
    },
    "book": {
        "category": "books", "slots": {"b": "books"},
        "label": ["finished {b[title]}", "reading {b[title]}"],
        "tags": ["books"],
        "text": [
            "{U} finished {b[title]} by {b[author]} on the train. It's {b[genre]}, and the "
            "last fifty pages were so tense {u} missed {my} stop. || {Su} already lent it to "
            "a colleague.",
            "Book club pick this month was {b[title]} by {b[author]}. {Su} thought it "
            "started slowly but the ending made up for it. || Half the group hated it, which "
            "made for a much better discussion than usual.",
            "{U} gave up on the fantasy trilogy and read {b[title]} by {b[author]} instead, "
            "{b[genre]}. Finished it in two evenings. || {Su} wants to find whatever the "
            "author wrote next.",
        ],
        "single": ["Who wrote {b[title]}, the book {Name} read?",
                   "What did {Name} think of {b[title]}?"],
        "para": [],
    },
    "film": {
        "category": "films", "slots": {"f": "films", "friend": "friend"},
        "label": ["saw {f[title]}", "cinema: {f[title]}"],
        "tags": ["films"],
        "text": [
            "Went to the cinema with {friend} to see {f[title]}. {Su} expected {f[kind]} and "
            "got something much stranger. || Still thinking about the ending, which {U} "
            "would describe as either genius or nonsense.",
            "{friend} and {U} watched {f[title]} at the little independent cinema. {f[kind]}. "
            "|| "
            "The sound system broke halfway through and they gave everyone free popcorn "
            "vouchers, so honestly a net win.",
        ],
        "single": ["Which film did {Name} see with {friend}?"],
        "para": ["What movie did {Name} go out to watch with {friend}?"],
    },
    "concert": {
        "category": "concerts", "slots": {"g": "bands", "friend": "friend"},
        "label": ["{g[name]} gig", "concert: {g[name]}"],
        "tags": ["music"],
        "text": [
            "{U} finally saw {g[name]} live at {g[venue]}, with {friend}. || The support "
            "act was forgettable but the main set was incredible; they closed with the "
            "old song everyone wanted. {My} ears are still ringing.",
            "Got last-minute tickets for {g[name]} at {g[venue]}. {friend} had a spare "
            "because someone dropped out. || Standing right at the front was a mistake for "
            "{my} back but worth it.",
        ],
        "single": ["Where did {Name} see {g[name]} play?",
                   "Who did {Name} go to the {g[name]} concert with?"],
        "para": ["Which band did {Name} watch perform at {g[venue]}?"],
    },
    "hike": {
        "category": "hikes", "slots": {"h": "trails", "friend": "friend"},
        "label": ["hike: {h[name]}", "walking {h[name]}"],
        "tags": ["outdoors"],
        "text": [
            "{U} did the {h[name]} walk in {h[region]} on Saturday, about {h[km]} km. || "
            "Started in fog, ended in sunshine, and {u} saw {h[animal]} near the top. "
            "{My} knees were not happy on the descent.",
            "Day out in {h[region]} with {friend}: the {h[name]} route, {h[km]} km. || "
            "{We} took the wrong path at the reservoir and added an hour. A farmer pointed {us} "
            "back. Saw {h[animal]}, which {friend} was thrilled about.",
        ],
        "single": ["How long was the {h[name]} walk {Name} did?",
                   "What animal did {Name} see on the {h[name]} walk?"],
        "para": ["Where did {Name} walk on the day {she} spotted {h[animal]}?"],
    },
    "purchase": {
        "category": "purchases", "slots": {"p": "purchases"},
        "label": ["bought {p[item]}", "new {p[short]}"],
        "tags": ["shopping"],
        "text": [
            "{U} finally bought {p[item]}. Paid {p[price]}, which hurt, but the old one was "
            "falling apart. || {Su} spent two evenings reading reviews before deciding.",
            "Big purchase this week: {p[item]}, {p[price]} in the end. || {Su} went back "
            "and forth for ages and then bought it in ten minutes on a Sunday afternoon.",
        ],
        "single": ["How much did {Name} pay for the {p[short]}?",
                   "What did {Name} buy for {p[price]}?"],
        "para": ["Which thing set {Name} back {p[price]}?"],
    },
    "lost_keys": {
        "slots": {"where": "places_lost"},
        "label": ["lost keys", "locked out"],
        "tags": [],
        "text": [
            "{U} locked {myself} out on Tuesday. The keys were, it turned out, {where}. || "
            "{Su} spent an hour on the doorstep before the neighbour with the spare came "
            "home. New rule: spare set at a friend's.",
            "Lost {my} keys for the whole of Wednesday. Turned the flat upside down. || "
            "They were {where} the entire time.",
        ],
        "single": ["Where did {Name} find {her} lost keys?"],
        "para": ["What happened the day {Name} couldn't get back into {her} home?"],
    },
    "phone_broke": {
        "slots": {},
        "label": ["phone screen smashed", "broken phone"],
        "tags": [],
        "text": [
            "{U} dropped {my} phone on the platform and the screen shattered completely. || "
            "The repair shop quoted ¤90 for a new screen; {u} decided to live with a cracked "
            "screen until the contract runs out in the spring.",
            "Phone drama: it went through the washing machine in a jeans pocket. || A bag "
            "of rice did nothing. {Su} had to buy a cheap replacement and lost a month of "
            "photos that weren't backed up.",
        ],
        "single": ["What happened to {Name}'s phone?"],
        "para": ["Why did {Name} end up with a cracked or dead handset?"],
    },
    "dentist": {
        "slots": {"tooth": "dental"},
        "label": ["dentist", "dentist appointment"],
        "tags": ["health"],
        "text": [
            "Dentist this morning. {Su} needed {tooth}, which {u} had been putting off for "
            "a year. || Numb face for half the day, couldn't drink coffee properly. Next "
            "check-up in six months.",
            "{U} went to the dentist about the twinge {u} had been ignoring. Turns out "
            "{tooth}. || Not as bad as {u} feared, and the new dentist is much gentler "
            "than the old one.",
        ],
        "single": ["What treatment did {Name} need at the dentist?"],
        "para": ["What did {Name} have done about {her} teeth?"],
    },
    "cold": {
        "slots": {},
        "label": ["off sick", "flu"],
        "tags": ["health"],
        "text": [
            "{U} was off sick most of the week with a horrible cold, the kind where "
            "everything aches. || Lived on lemsip and toast and watched an entire series "
            "in bed. Back on {my} feet now, mostly.",
            "Came down with flu on Sunday night and was flat out until Thursday. || {Su} "
            "had to cancel the dinner {u} had organised, which {u} felt bad about.",
        ],
        "single": ["Why was {Name} off sick?"],
        "para": ["When was {Name} laid up in bed feeling ill?"],
    },
    "volunteer": {
        "slots": {"v": "volunteering"},
        "label": ["volunteering", "{v[short]} volunteering"],
        "tags": ["community"],
        "text": [
            "{U} did a shift volunteering at {v[name]} on Saturday. {v[task]}. || Tiring "
            "but {u} liked the other volunteers a lot, and {u} signed up for another shift "
            "next month.",
            "First time helping out at {v[name]}. {v[task]}. || The coordinator asked if "
            "{u} could come regularly; {u} said maybe once a month.",
        ],
        "single": ["Where did {Name} volunteer?", "What did {Name} do as a volunteer?"],
        "para": ["What unpaid community work has {Name} done?"],
    },
    "museum": {
        "slots": {"m": "exhibitions", "friend": "friend"},
        "label": ["{m[short]} exhibition", "museum day"],
        "tags": ["culture"],
        "text": [
            "{U} went to the {m[name]} exhibition with {friend}. || The best room was the "
            "one with {m[highlight]}. {Su} bought a postcard of it for the fridge.",
            "Rainy Sunday, so {U} went to see {m[name]}. || Too crowded to see much, apart "
            "from {m[highlight]}, which was worth the entry fee on its own.",
        ],
        "single": ["Which exhibition did {Name} go to?",
                   "What did {Name} like best at the {m[short]} exhibition?"],
        "para": ["What art or history show did {Name} spend an afternoon at?"],
    },
    "workshop": {
        "slots": {"w": "workshops"},
        "label": ["{w[short]} workshop", "{w[short]} class"],
        "tags": ["learning"],
        "text": [
            "{U} did a one-day {w[name]} workshop at the community centre. || {Su} was the "
            "worst in the group by a mile but the teacher, {w[teacher]}, was very patient. "
            "{Su} came home with {w[result]}.",
            "Signed up on a whim for a {w[name]} taster session. || The teacher, "
            "{w[teacher]}, said {u} had a natural feel for it, which was probably flattery. "
            "Made {w[result]}.",
        ],
        "single": ["What workshop did {Name} take?", "Who taught the {w[short]} session?"],
        "para": ["What hands-on skill did {Name} try for a day?"],
    },
    "wedding_guest": {
        "slots": {"couple": "friend", "place": "venues"},
        "label": ["{couple}'s wedding", "wedding weekend"],
        "tags": ["friends"],
        "text": [
            "{couple}'s wedding was on Saturday at {place}. {U} cried during the vows, "
            "obviously. || The speeches went on far too long but the band was brilliant and "
            "{u} danced until one. Got a lift back with one of the cousins.",
            "Went to {couple}'s wedding at {place}. || It poured with rain for the photos, "
            "but everyone was in a great mood anyway. {Su} caught the bouquet by accident.",
        ],
        "single": ["Where was {couple}'s wedding?", "Whose wedding did {Name} attend?"],
        "para": ["Which of {Name}'s friends got married, and where was the party?"],
    },
    "birthday": {
        "slots": {"friend": "friend", "gift": "gifts"},
        "label": ["{friend}'s birthday", "birthday party"],
        "tags": ["friends"],
        "text": [
            "It was {friend}'s birthday on Friday; {U} got them {gift}. || They loved it, or "
            "did a very good impression of loving it. The party went on until three.",
            "{friend}'s birthday drinks were on Saturday. {U} spent ages choosing a present "
            "and went with {gift}. || Lovely evening, slightly sore head the next day.",
        ],
        "single": ["What did {Name} give {friend} for their birthday?"],
        "para": ["What present did {Name} pick out for {friend}?"],
    },
    "car_repair": {
        "slots": {"fault": "car_faults"},
        "label": ["car trouble", "car at the garage"],
        "tags": ["car"],
        "text": [
            "The car broke down on the way to work: {fault}. || The garage had it for three "
            "days and the bill was awful. {Su} is seriously wondering whether it's worth "
            "keeping a car at all.",
            "Car's in the garage again. This time it's {fault}. || {Su} has been getting the "
            "bus, which is slower but fine, and {u} read a whole book on the way.",
        ],
        "single": ["What was wrong with {Name}'s car?"],
        "para": ["Why did {Name} have to take the bus for a few days?"],
    },
    "flood": {
        "slots": {},
        "label": ["leak in the flat", "water everywhere"],
        "tags": ["home"],
        "text": [
            "Water came through the bathroom ceiling on Monday night; the upstairs neighbour's "
            "washing machine had leaked. || {U} spent the evening with buckets and towels. "
            "The landlord is sending someone about the stain.",
            "Burst pipe under the kitchen sink. {U} only noticed because the floor was "
            "squelching. || Emergency plumber, ninety minutes, a lot of money.",
        ],
        "single": ["What caused the water damage in {Name}'s home?"],
        "para": ["Why did {Name} spend an evening mopping up with towels and buckets?"],
    },
    "plant": {
        "slots": {"pl": "plants"},
        "label": ["new plant", "plant shopping"],
        "tags": ["home"],
        "text": [
            "{U} bought {pl} from the market and gave it the sunny windowsill. || {Su} "
            "named it, which {friend_any} says is a slippery slope.",
            "Adopted {pl} that a neighbour was throwing out. || It looks half-dead but {u} "
            "{is} determined to bring it back.",
        ],
        "single": ["What plant did {Name} get?"],
        "para": ["What green thing did {Name} bring home to look after?"],
    },
    "parking_fine": {
        "slots": {"amount": "fines"},
        "label": ["parking fine", "ticket"],
        "tags": ["car"],
        "text": [
            "{U} got a parking ticket outside the doctor's surgery, {amount}. The sign was "
            "hidden behind a tree, honestly. || {Su} has appealed, with photos.",
            "Parking fine, {amount}, because the machine was broken and the app wouldn't load."
            " || {Su} paid it in the end because appealing looked like more effort than it "
            "was worth.",
        ],
        "single": ["How much was {Name}'s parking fine?"],
        "para": ["What penalty did {Name} get for leaving the car in the wrong place?"],
    },
    "board_games": {
        "slots": {"game": "games", "friend": "friend"},
        "label": ["games night", "board games at {friend}'s"],
        "tags": ["friends"],
        "text": [
            "Board game night at {friend}'s. {We} played {game} for the first time. || {U} "
            "won by pure luck and has been insufferable about it since.",
            "{friend} hosted games night; {game} was the hit of the evening. || Took two "
            "hours to learn the rules and then nobody wanted to stop. {Su} wants a copy.",
        ],
        "single": ["What game did {Name} play at {friend}'s games night?"],
        "para": ["Which tabletop game did {Name} try at {friend}'s place?"],
    },
    "parents_visit": {
        "slots": {"dish": "dishes_home"},
        "label": ["parents visiting", "family weekend"],
        "tags": ["family"],
        "text": [
            "{My} parents came to stay for the weekend. {U} cooked {dish}, which {my} dad "
            "had seconds of. || {My} mum reorganised the kitchen cupboards without asking, "
            "as always. Lovely, exhausting.",
            "Parents' visit went fine. {We} did the market, a long lunch, and {U} made {dish} "
            "on Saturday night. || Only one argument, about politics, which is a record.",
        ],
        "single": ["What did {Name} cook when {her} parents visited?"],
        "para": ["What meal did {Name} make for {her} mum and dad?"],
    },
    "conference": {
        "slots": {"conf": "conferences"},
        "label": ["{conf[short]} conference", "conference talk"],
        "tags": ["work"],
        "text": [
            "{U} gave a talk at {conf[name]} on {conf[topic]}. Nervous beforehand, but it "
            "went well. || Someone from another company came up afterwards and asked for the "
            "slides, and {u} got a free tote bag.",
            "Two days at {conf[name]} for work. {Su} went to mostly {conf[topic]} sessions. "
            "|| The best bit was the hallway conversations; the worst was the hotel breakfast.",
        ],
        "single": ["What topic was {Name} focused on at {conf[name]}?",
                   "Which conference did {Name} attend for work?"],
        "para": ["Where did {Name} present or listen to talks for {her} job?"],
    },
    "haircut": {
        "slots": {"style": "haircuts"},
        "label": ["new haircut", "hairdresser"],
        "tags": [],
        "text": [
            "{U} got {style}. It was an impulse decision in the chair. || Two people at work "
            "didn't recognise {me} for a second.",
            "New hair: {style}. || {Su} isn't sure yet but everyone else likes it.",
        ],
        "single": ["What haircut did {Name} get?"],
        "para": ["How did {Name} change {her} look on impulse?"],
    },
    "bike_stolen": {
        "slots": {"where": "theft_places"},
        "label": ["bike stolen", "stolen bike"],
        "tags": ["cycling"],
        "text": [
            "{My} bike was stolen {where}. Lock cut clean through. || Reported it to the "
            "police, who were polite and clearly not going to find it. {Su} is using a "
            "rental bike for now.",
            "Someone nicked {my} bike {where}. || {Su} had only just put new tyres on it.",
        ],
        "single": ["Where was {Name}'s bike stolen?"],
        "para": ["Where did a thief take {Name}'s two-wheeler from?"],
    },
    "recipe": {
        "slots": {"dish": "ambitious_dishes"},
        "label": ["cooking project", "kitchen experiment"],
        "tags": ["food"],
        "text": [
            "{U} spent all of Sunday making {dish} from scratch. || Four hours, every pan in "
            "the kitchen, and it was only okay. Next time {u}'ll buy it.",
            "Ambitious cooking this week: {dish}. || It actually worked! {Su} took photos "
            "for evidence and sent them to everyone.",
        ],
        "single": ["What did {Name} spend a whole Sunday cooking?"],
        "para": ["Which dish did {Name} attempt from scratch in {her} kitchen?"],
    },
    "passport": {
        "slots": {},
        "label": ["passport renewal", "passport"],
        "tags": ["admin"],
        "text": [
            "{U} realised {my} passport expires in two months, so {u} sent off the renewal. "
            "|| The photo booth took five attempts; in the end {u} looks like a startled "
            "owl. Should arrive in three weeks.",
        ],
        "single": ["Why did {Name} need a new passport?"],
        "para": ["What travel document paperwork did {Name} have to sort out?"],
    },
    "babysitting": {
        "slots": {"kid": "kids"},
        "label": ["babysitting {kid}", "day with {kid}"],
        "tags": ["family"],
        "text": [
            "{U} looked after {my} niece {kid} on Saturday. {We} went to the park, then the "
            "soft play, then the park again. || By four o'clock {u} was more tired than "
            "after any gym session.",
            "Babysat {kid} for the day. {kid} taught {me} a card game with rules that changed "
            "every round. || Home by six and asleep by nine.",
        ],
        "single": ["Who did {Name} babysit?"],
        "para": ["Which young relative did {Name} look after for a day?"],
    },
}

# multi-session questions: one per category with at least two events
MULTI = {
    "trips": ["Which cities has {Name} travelled to?", "Where has {Name} been on trips?"],
    "restaurants": ["Which restaurants has {Name} been to?",
                    "What places has {Name} eaten out at?"],
    "books": ["What books has {Name} read?", "Which books did {Name} finish?"],
    "films": ["Which films has {Name} seen?"],
    "concerts": ["Which bands has {Name} seen live?", "What gigs did {Name} go to?"],
    "hikes": ["Where has {Name} been hiking?", "Which walks has {Name} done?"],
    "purchases": ["What big purchases has {Name} made?"],
}
