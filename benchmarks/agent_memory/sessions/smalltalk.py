"""Small talk and session framing: the text around the facts.

Dialogue sessions are turns between the user and the agent ("you" = the
user); notes sessions are the agent's own notes about the user. Slots:
{Name}, {city} (where the user lives at that date), {employer}, {friend},
{partner}, {show}, {dish}, {day}; pronouns {she} {She}, {her} (possessive:
her / his), {him} (object: her / him).
A template whose slot the persona lacks (no partner, say) is not used.
"""

# (agent, user) pairs that open a dialogue session
DIALOGUE_OPENERS = [
    ("Morning, {Name}! How are things in {city} today?",
     "Grey and drizzly, as usual. I've had two coffees already and I'm only just awake."),
    ("Hi {Name}, good to hear from you. How was your week?",
     "Honestly a bit of a blur. Lots going on, some good, some less good. Let me catch you up."),
    ("Hey! What's new?",
     "Not loads, but a few things I wanted to get down before I forget them."),
    ("Evening, {Name}. Long day?",
     "Long-ish. I finally sat down with a cup of tea and thought I'd check in."),
    ("Hello again. Did you manage to sleep better this week?",
     "A bit, yes. I stopped looking at my phone in bed, which apparently is a thing that works."),
    ("Hi {Name}! It's been a little while. How have you been?",
     "I know, sorry, it's been hectic. I'm fine though, mostly. There's a fair bit to tell you."),
    ("Good afternoon! Is this a quick one or a proper catch-up?",
     "Proper catch-up, I think. I've got time while the washing machine finishes."),
    ("Hey {Name}. How's the weather treating you?",
     "Weirdly warm for this time of year. I went out without a coat and regretted nothing."),
    ("Hi! Anything on your mind today?",
     "A few bits and pieces. Nothing dramatic, just life admin and some news."),
    ("Morning! Did you do anything nice at the weekend?",
     "Mostly pottered about the flat, did the food shop, watched too much telly. It was lovely."),
    ("Hey, {Name}. You sound cheerful.",
     "I am, actually! Sun's out, I got a decent night's sleep, and work was quiet for once."),
    ("Hi {Name}, how's {partner}?",
     "{partner} is good, busy as ever. Says hi, by the way."),
    ("Hello! How was {day}?",
     "Fine, fairly ordinary. I've been meaning to talk to you about a couple of things."),
]

# (user, agent) pairs: chat that carries no fact the questions ask about
DIALOGUE_SMALLTALK = [
    ("I think I'm getting a cold. Everyone at work is sniffing.",
     "Lots of tea and an early night, then."),
    ("I cleaned the fridge and found a jar of something that may once have been pesto.",
     "Brave. Straight in the bin, I hope."),
    ("The internet went down for a whole evening. I read a book like it was 1995.",
     "Sounds quite nice, honestly."),
    ("I've been trying to stretch every morning. Day four and I'm still doing it.",
     "Four days is a streak!"),
    ("My gran sent me a postcard with just the word 'hello' on it. I love her so much.",
     "That's adorable."),
    ("I got a parcel meant for next door. It's been sitting in my hallway for three days.",
     "Maybe a note through their door?"),
    ("I went for a walk in the park at lunchtime and saw a man walking a rabbit on a lead.",
     "That's the best thing I've heard all week."),
    ("I've decided I need more plants. Or fewer. I can't decide.", "Definitely more."),
    ("Had a long video call with an old school friend. We talked for two hours.",
     "Those calls are the best."),
    ("My laptop fan has started making a noise like a small aeroplane.",
     "Might be worth a clean. I can find a guide if you want."),
    ("I've been listening to the same album on repeat all week.", "Which one?"),
    ("The shop had no bread at all this morning. Not a single loaf.", "Strange times."),
    ("I've started watching {show}. Three episodes in one evening, which is not like me.",
     "That's a good sign for a show. No spoilers, but the second season is meant to be even "
     "better."),
    ("The neighbours are doing some DIY again. Drilling at eight on a Saturday should be illegal.",
     "It really should. Maybe earplugs as a stopgap? I can add them to your shopping list."),
    ("I made {dish} last night and it was actually decent. Didn't even set the smoke alarm off.",
     "Progress! Do you want me to save the recipe so you can find it again?"),
    ("Work's been fine. Nothing exciting, meetings about meetings, you know how it is.",
     "I do. Quiet weeks are underrated, though."),
    ("I keep meaning to call my gran and then it's ten at night and too late.",
     "Want me to remind you on Sunday afternoon? That seems to be when you've got time."),
    ("It rained so hard on the way home I had to stand in a bus shelter for twenty minutes.",
     "Ugh. At least it's the kind of story that's funny afterwards."),
    ("{friend} sent me a voice note that was eleven minutes long. Eleven!",
     "That's practically a podcast. Did you listen to the whole thing?"),
    ("I'm trying to drink less coffee. Today I managed to stop at three, which counts as a win.",
     "It absolutely counts. Small steps."),
    ("The supermarket has moved everything around again. I spent ten minutes looking for "
     "rice.",
     "They do that on purpose so you walk past more stuff, apparently."),
    ("I finally sorted out the cupboard under the stairs. Found three umbrellas and a "
     "tennis racket I don't remember buying.",
     "That is deeply satisfying. Keep the umbrellas, you'll need them."),
    ("Not much else to report. I've just been tired this week, early nights mostly.",
     "That's allowed. Your body probably needed it."),
    ("I tried a new podcast on the commute, but the host talks so slowly I had to speed it up.",
     "1.5x speed is the only way for some of them."),
    ("My phone keeps telling me my screen time is up. I'd rather not know, thanks.",
     "You can turn that notification off, if you like. I won't judge."),
    ("I saw a fox in the street last night, just sitting there like it owned the place.",
     "They really do act like landlords. Was it the scruffy one again?"),
    ("{partner} and I had a silly argument about whose turn it was to do the bins.",
     "The great bin debate. Maybe a rota on the fridge would settle it for good."),
    ("Had a lazy Sunday. Long walk, a roast, fell asleep on the sofa at six.",
     "That sounds like a perfect Sunday, honestly."),
    ("I've been on a bit of a tidying kick. Took two bags to the charity shop.",
     "Nice. Do you feel lighter for it?"),
    ("It's been so hot that I've basically been living on salads and ice lollies.",
     "Very sensible. Remember to drink water too, not just iced coffee."),
    ("The heating's on the blink again, so I'm typing this in a jumper and a scarf.",
     "Oh no. Want me to find the landlord's number or the boiler company?"),
    ("I went to bed at nine last night like an old person, and it was glorious.",
     "Sometimes that's exactly what's needed."),
    ("{friend} wants to do a pub quiz team. I said yes before thinking about it.",
     "Quiz nights are fun even when you lose. Especially when you lose, maybe."),
    ("Nothing much, just the usual: laundry, emails, meal prep for the week.",
     "The unglamorous stuff. It does make the week easier though."),
    ("I've started leaving my laptop at work on Fridays so I can't check emails.",
     "That's a good boundary. How has it felt?"),
    ("My back's a bit stiff from sitting all day. I should stretch more.",
     "Maybe a quick stretch at lunch? I could nudge you around one."),
]

# (agent, user) pairs that close a dialogue session
DIALOGUE_CLOSERS = [
    ("Anything you'd like me to remind you about?",
     "Just the usual. I'll message you if anything comes up. Thanks for listening."),
    ("That's a lot for one week. Take it easy tonight, okay?", "Will do. Speak soon!"),
    ("I've noted all that down. Want to pick this up next week?", "Yes, let's. Night!"),
    ("Good luck with everything. Let me know how it goes.", "I will. Cheers."),
    ("Sounds like a good plan. Talk soon, {Name}.", "Talk soon!"),
    ("Okay, I'll keep all that in mind. Anything else?", "No, that's everything for now."),
    ("Right, I've saved it all. Have a good evening.", "You too. Well, you know what I mean."),
    ("Shall I put any of that in your calendar?", "Not yet, I'll tell you when things are "
     "firmer. Bye for now."),
]

# paragraphs that open an agent's notes
NOTES_OPENERS = [
    "Quick check-in with {Name} this evening. {She} sounded tired but upbeat.",
    "Caught up with {Name} over chat. Weather in {city} apparently miserable again.",
    "{Name} got in touch mid-morning, in between meetings, so the notes are a bit scattered.",
    "Long conversation with {Name} today. {She} had a lot to get off {her} chest.",
    "Short session; {Name} was on the bus and typing on {her} phone.",
    "{Name} checked in after a few days' silence. Said the week had run away with {him}.",
    "Sunday chat with {Name}. Relaxed mood, no rush.",
    "{Name} opened with a complaint about the trains, then we got to the actual news.",
    "Catch-up with {Name}. {She} had just got back from the shops and was unpacking as "
    "we talked.",
    "Evening session. {Name} said {she} had been meaning to check in all week.",
    "{Name} messaged early, before work at {employer}. Coffee in hand, apparently.",
    "Brief one today. {Name} is busy but wanted a few things written down.",
]

# paragraphs of general chat in notes
NOTES_SMALLTALK = [
    "Thinks {she} is getting a cold; half the office is sniffing.",
    "Cleaned out the fridge and found a jar of something that may once have been pesto.",
    "Internet went down one evening, so {she} read a book instead. Enjoyed it.",
    "Stretching every morning now; four days in a row so far.",
    "{Her} gran sent a postcard with just the word 'hello' on it.",
    "Has had a neighbour's parcel sitting in the hallway for three days.",
    "Saw a man walking a rabbit on a lead in the park at lunchtime.",
    "Undecided whether the flat needs more plants or fewer.",
    "Two-hour video call with an old school friend.",
    "Laptop fan making a noise like a small aeroplane; offered to find a cleaning guide.",
    "Listening to the same album on repeat all week.",
    "The shop had no bread at all this morning.",
    "Small talk: {she} has started watching {show} and is hooked. Warned {him} off spoilers.",
    "{She} mentioned the neighbours drilling again on a Saturday morning. Not amused.",
    "Cooked {dish} the other night; said it came out better than expected.",
    "Work at {employer} is ticking along. Nothing {she} wanted to go into.",
    "Still means to ring {her} gran more often. Suggested Sunday afternoons, when {she} "
    "usually has time.",
    "Got caught in a downpour on the way home and waited it out in a bus shelter.",
    "{friend} has apparently taken to sending very long voice notes. {Name} finds it "
    "funny and slightly exhausting.",
    "Trying to cut down on coffee. Three cups today, which {she} counts as progress.",
    "Spent a while grumbling about the supermarket rearranging its aisles.",
    "Cleared out the cupboard under the stairs and found three umbrellas and a tennis "
    "racket {she} has no memory of buying.",
    "Said {she} has been tired this week and has mostly had early nights. No cause "
    "for concern as far as {she} can tell.",
    "Trying a new podcast; the host is slow, so {she} listens at 1.5x.",
    "Complained about the screen-time notifications on {her} phone. Showed {him} how to "
    "switch them off.",
    "Saw a fox sitting in the middle of the street last night, unbothered by anything.",
    "Minor domestic dispute with {partner} over the bins. Resolved, apparently, with a rota.",
    "Lazy Sunday: long walk, a roast, asleep on the sofa by six.",
    "Took two bags of clothes to the charity shop. Feels lighter for it.",
    "It has been hot; {she} is living on salads and ice lollies. Reminded {him} about water.",
    "Heating broken again, typing in a jumper. Offered to find the boiler company's number.",
    "Went to bed at nine the other night and called it the best decision of the week.",
    "{friend} has roped {him} into a pub quiz team. Agreed before thinking it through.",
    "Otherwise the usual: laundry, emails, meal prep.",
    "Leaves the work laptop at {employer} on Fridays now so {she} cannot check email at "
    "the weekend. Says it helps.",
    "Stiff back from sitting all day; suggested a stretch at lunchtime.",
]

# agent's closing notes
NOTES_CLOSERS = [
    "Nothing to action for now.",
    "Follow up next week.",
    "Reminders: none requested.",
    "Left it there; {she} had to go.",
    "To do: check back on this in a week or two.",
    "{She} will message if anything changes.",
    "Ended on a good note.",
    "No calendar entries needed yet.",
]

# the agent's generic prompts between two parts of a user's story (dialogue)
DIALOGUE_PROMPTS = [
    "Oh? Go on.", "How did that go?", "And then what happened?", "Tell me more.",
    "How did you feel about that?", "That sounds like a lot. What next?",
    "Interesting! And?", "Wait, really? What happened after that?",
    "Hm. How did it turn out?", "Okay, and how was it in the end?",
]

DISHES = ["a mushroom risotto", "a lentil dal", "shakshuka", "a Thai green curry",
          "homemade gnocchi", "a fish pie", "chilli con carne", "a tray of roast vegetables",
          "banana bread", "a big pot of minestrone", "pad thai", "a chickpea stew"]
SHOWS = ["that new detective series", "a baking competition show", "the Scandinavian crime "
         "drama everyone talks about", "a documentary series about octopuses", "an old sitcom "
         "from the nineties", "a fantasy series with dragons", "a reality show about house "
         "renovations", "a true-crime podcast adaptation"]

# -- composed small talk: a topic line, a detail and the matching reply ------
# Each entry: (what the user says, the agent's reply, the same in notes).
WHEN = ["last night", "on Sunday", "at the weekend", "yesterday", "on Tuesday",
        "this morning", "on Friday evening"]
WEATHER = [
    ("grim, properly grey all day", "Typical. Hopefully it lifts soon.", "grey all day"),
    ("gorgeous, I ate my lunch outside", "Make the most of it!", "lovely; lunch outside"),
    ("so windy the bins blew over", "Ha, hold on to your hat.", "windy enough to knock "
     "the bins over"),
    ("muggy and close, I can't sleep", "A fan by the window might help.", "muggy, "
     "sleeping badly"),
    ("freezing, there was frost on the car", "Brr. Gloves weather.", "freezing, frost on "
     "the cars"),
    ("all four seasons in one afternoon", "Very on brand for {city}.", "all over the "
     "place"),
    ("bright but bitterly cold", "The best kind of winter day, if you're wrapped up.",
     "bright but bitterly cold"),
    ("drizzly and miserable", "Sofa weather, then.", "drizzly and miserable"),
]
COOKING = [
    ("It was actually decent.", "Nice, do you want me to save the recipe?",
     "apparently decent"),
    ("It was a disaster, far too salty.", "Ha, there's always next time.",
     "far too salty, by {her} own account"),
    ("Made enough for about six days.", "Lunches sorted, then.", "enough for the week"),
    ("I burnt the bottom but the top was fine.", "The top is the important bit.",
     "slightly burnt but edible"),
    ("Nobody complained, which I'm taking as a win.", "A clear win.",
     "no complaints from anyone"),
    ("I'd make it again, with more garlic.", "More garlic is always the answer.",
     "would make it again with more garlic"),
]
WATCHING = [
    ("Completely hooked.", "No spoilers from me, I promise.", "hooked"),
    ("Not sure it's for me yet.", "Give it a couple more episodes?", "undecided so far"),
    ("I fell asleep halfway through the finale.", "That's a review in itself.",
     "fell asleep during the finale"),
    ("The acting is terrible but I can't stop.", "The best kind of terrible.",
     "enjoying how bad it is"),
    ("I watched four episodes in one go.", "That's the sign of a good one.",
     "four episodes in one sitting"),
]
COMMUTE = [
    ("The train was cancelled {when} and I had to wait forty minutes.",
     "Ugh. Did you at least get a seat on the next one?",
     "{Her} train was cancelled {when}; forty-minute wait."),
    ("The bus driver {when} was singing the whole way. It was quite nice actually.",
     "That's a lovely little thing.", "Bus driver sang the whole way {when}; {she} liked it."),
    ("Traffic {when} was unreal, an hour to go three miles.", "That sounds exhausting.",
     "Stuck in traffic {when}, an hour for three miles."),
    ("I cycled in {when} and got absolutely soaked.", "Hope you had a change of clothes.",
     "Cycled in {when} and got soaked."),
    ("Walked to work {when} for a change. Forty minutes, but I felt great.",
     "Nice way to start the day.", "Walked to work {when}; felt good for it."),
]
CHORES = ["sorting out the recycling", "defrosting the freezer", "doing the ironing",
          "cleaning the oven", "re-potting plants", "fixing the wobbly shelf",
          "going through old paperwork", "washing the windows"]
CHORE_REPLIES = ["Very productive.", "The glamour!", "That's a good feeling, once it's done.",
                 "Satisfying, though."]
SLEEP = [
    ("I've been sleeping terribly, waking up at four every night.",
     "That's rough. Anything on your mind?", "Sleeping badly, awake at four most nights."),
    ("Slept ten hours straight last night. I think I needed it.", "Clearly!",
     "Slept ten hours straight and feels better for it."),
    ("The neighbours' cat kept yowling all night.", "Poor you. Earplugs?",
     "Kept awake by the neighbours' cat."),
    ("I've been going to bed earlier and it's helping.", "Glad to hear it.",
     "Earlier nights are helping."),
]


FRIEND_NEWS = [
    ("is thinking about getting a dog", "Oh, exciting. Any idea what kind?"),
    ("just got back from a stag do and is still recovering", "Ha, poor thing."),
    ("has started running at six in the morning, which is madness", "Each to their own!"),
    ("is redecorating the living room again", "Again? What colour this time?"),
    ("has a new partner that nobody has met yet", "Mysterious."),
    ("lost their phone on a night out", "Oh no, that's the worst."),
    ("is finally learning to drive", "Good for them."),
    ("got a promotion at work", "That's brilliant, tell them congratulations."),
]
PLANS = [
    ("do absolutely nothing", "Sounds perfect."),
    ("sort out the garden, finally", "Good luck with that."),
    ("see a film, if I can pick one", "I can suggest a few if you like."),
    ("go to the market early", "Early is the only way for the good stuff."),
    ("catch up on sleep", "Very wise."),
    ("have a couple of friends over for dinner", "Nice. What are you cooking?"),
]
SPANS = ["the whole weekend", "Sunday afternoon", "most of Saturday", "an hour this morning",
         "yesterday evening"]


# weather, cooking, watching, commute, chores, friends' news, weekend plans
TOPIC_LIMIT = {0: 1, 1: 2, 2: 1, 3: 1, 4: 2, 5: 2, 6: 1}


def composed(rng, slots: dict, dialogue: bool, used: dict) -> tuple[str, str] | str | None:
    """One small-talk exchange built from parts (many combinations, so
    sessions do not repeat each other word for word). ``used`` counts the
    topics of this session (TOPIC_LIMIT times each); commuting only for someone
    with a job. None when every topic is used up."""
    open_kinds = [k for k in range(7) if used.get(k, 0) < TOPIC_LIMIT[k]
                  and not (k == 3 and not slots.get("employer"))]
    if not open_kinds:
        return None
    kind = rng.choice(open_kinds)
    used[kind] = used.get(kind, 0) + 1
    when = rng.choice(WHEN)
    if kind == 0:
        user, agent, note = rng.choice(WEATHER)
        texts = (f"The weather has been {user}.", agent,
                 f"Weather in {{city}} {note}, apparently.")
    elif kind == 1:
        user, agent, note = rng.choice(COOKING)
        dish = rng.choice(DISHES)
        texts = (f"I made {dish} {when}. {user}", agent, f"Cooked {dish} {when}: {note}.")
    elif kind == 2:
        user, agent, note = rng.choice(WATCHING)
        show = rng.choice(SHOWS)
        texts = (f"I've been watching {show}. {user}", agent,
                 f"Watching {show}; {note}.")
    elif kind == 3:
        user, agent, note = rng.choice(COMMUTE)
        texts = (user, agent, note)
    elif kind == 4:
        chore, span = rng.choice(CHORES), rng.choice(SPANS)
        texts = (f"Spent {span} {chore}. Riveting stuff.", rng.choice(CHORE_REPLIES),
                 f"Spent {span} {chore}.")
    elif kind == 5:
        news, agent = rng.choice(FRIEND_NEWS)
        texts = (f"{{friend}} {news}.", agent, f"News from {{friend}}, who {news}.")
    else:
        plan, agent = rng.choice(PLANS)
        texts = (f"This weekend I'm planning to {plan}.", agent,
                 f"Weekend plan: {plan}.")
    if rng.random() < 0.4 and kind in (0, 1, 3) and not used.get("sleep"):
        used["sleep"] = 1
        extra = rng.choice(SLEEP)
        texts = (texts[0] + " " + extra[0], texts[1], texts[2] + " " + extra[2])
    out = [t.replace("{when}", when).format(**slots) for t in texts]
    return (out[0], out[1]) if dialogue else out[2]


REACTIONS = {
    "good": ["That sounds great. I'm glad it went well.", "That's lovely to hear.",
             "Brilliant. Keep me posted.", "Nice! I've made a note of it.",
             "Oh, that's really good news.", "Love that.", "Ha, that's very you. I've written "
             "it down."],
    "bad": ["Oh, that's annoying. Let me know if I can help sort anything out.",
            "I'm sorry, that sounds stressful. Hopefully it settles down soon.",
            "Ugh, what a pain.", "That's rubbish, I'm sorry.", "Oh no. Is there anything I "
            "can do?"],
    "neutral": ["Good to know. I'll remember that.", "Noted. Do you want a reminder about any "
                "of that?", "Fair enough.", "Okay, I've got that down.", "Makes sense. Let "
                "me know how it develops.", "Thanks, noted."],
}
REMARKS = {
    "good": ["{She} seemed pleased about it.", "Sounded happy.", "Good news, all told.", ""],
    "bad": ["Sounded a bit stressed about it.", "Not a great week for {him}.",
            "Offered to help if needed.", ""],
    "neutral": ["Noted.", "Worth remembering.", "Said {she} would keep me posted.",
                "Made a note to ask about it next time.", "", ""],
}

# -- small errands the agent does during a session ---------------------------
SHOPPING = ["oat milk", "bin bags", "washing-up liquid", "coffee beans", "batteries",
            "toothpaste", "lemons", "a birthday card", "light bulbs", "dishwasher tablets",
            "rice", "tinned tomatoes", "cat food", "sellotape", "paracetamol"]
REMINDERS = ["put the bins out", "renew the library books", "call the bank",
             "book a haircut", "pay the water bill", "send the thank-you card",
             "water the plants", "check the tyre pressure", "order more contact lenses",
             "back up the laptop", "return the parcel", "ring gran"]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday morning",
        "Sunday evening", "tomorrow", "the end of the month"]
FOLLOW_UPS = {
    "good": [("How are you feeling about it now?", "Really happy, honestly. It was just "
              "what I needed."), ("Would you do it again?", "In a heartbeat.")],
    "bad": [("How are you feeling about it now?", "Annoyed, but it'll sort itself out."),
            ("Anything I can do?", "Not really, but thanks. Just needed to moan.")],
    "neutral": [("How do you feel about it?", "Fine, I think. We'll see."),
                ("Anything you want me to keep track of there?", "Not yet, I'll let you "
                 "know.")],
}


def errand(rng, dialogue: bool) -> tuple[str, str] | str:
    if rng.random() < 0.5:
        things = rng.sample(SHOPPING, rng.randint(1, 3))
        listed = things[0] if len(things) == 1 else ", ".join(things[:-1]) + " and " + \
            things[-1]
        if dialogue:
            return (f"Can you add {listed} to the shopping list?",
                    rng.choice(["Done.", "Added.", "On the list."]))
        return f"Added {listed} to the shopping list."
    task, day = rng.choice(REMINDERS), rng.choice(DAYS)
    if dialogue:
        return (f"Remind me to {task} on {day}, would you?",
                rng.choice([f"Reminder set for {day}.", "Will do.", f"Okay, {day} it is."]))
    return f"Reminder set: {task}, {day}."
