"""Storylines that run across many sessions: plans that change, facts that are
superseded, recurring projects. Markup as in events.py; slots come from the
persona's thread parameters (people.py).

Per stage: text variants, `single`/`para` questions about that stage, and
`state` updates (e.g. the city the user lives in from then on). Per thread:
`latest` questions (answer: the newest stage played; older stages are
relevant context) and `superseded` questions (answer: the `new` stages; the
`old` stages hold the fact that no longer holds).
"""

from typing import Any

THREADS: dict[str, dict[str, Any]] = {
    "move": {
        "tags": ["moving", "home"],
        "stages": [
            {"label": ["thinking about moving", "{to_city}?"],
             "text": ["{U} {has} been thinking seriously about leaving {from_city} for "
                      "{to_city}. {reason}. || Rent would be a bit lower too, although {u} "
                      "would miss {from_spot}. Nothing decided; {u} want{s} to visit a "
                      "couple of times first."],
             "single": ["Why was {Name} thinking about moving to {to_city}?"],
             "para": ["What was pulling {Name} towards a new city?"]},
            {"label": ["flat viewings in {to_city}", "flat hunting"],
             "text": ["Spent Saturday viewing flats in {to_city}. Six viewings, two "
                      "possibles. || Favourite so far is a place in {nb1} with {feature}, "
                      "though the agent was vague about the deposit. The other one, in {nb2}, "
                      "was smaller but quieter."],
             "single": ["Which neighbourhood was {Name}'s favourite flat in at first?"],
             "para": ["What did {Name} like about the first flat that stood out?"]},
            {"label": ["signed the lease", "new flat sorted"],
             "text": ["The {nb1} flat fell through; the landlord gave it to someone who "
                      "could move in sooner. || So {U} signed for the one in {nb2} instead, "
                      "moving on {move_date}. {Su} {is} relieved more than excited, "
                      "honestly."],
             "single": ["When was {Name} due to move into the new flat?",
                        "Why did the first flat {Name} wanted fall through?"],
             "para": []},
            {"label": ["moving day", "moved!"],
             "text": ["Moving day. The van was two hours late and {mover} and {U} carried "
                      "everything up three flights. || The only casualty was {broken}. "
                      "First night in {to_city} eating chips on the floor because the table "
                      "legs were still in a box somewhere."],
             "single": ["What got broken when {Name} moved?",
                        "Who helped {Name} carry everything on moving day?"],
             "para": ["What was the one thing damaged during {Name}'s relocation?"],
             "state": {"city": "{to_city}"}},
            {"label": ["settling in", "new neighbourhood"],
             "text": ["Settling in to {nb2}. {U} found a cafe round the corner, {cafe}, "
                      "where they already know {my} order. || The neighbour downstairs, "
                      "{neighbour}, brought round a plant as a welcome, which was sweet."],
             "single": ["What is the name of the cafe near {Name}'s new place?",
                        "Who is {Name}'s new downstairs neighbour?"],
             "para": []},
        ],
        "latest": ["How is {Name} settling into the new place?",
                   "What's the latest with {Name}'s move?"],
        "superseded": [
            {"q": ["Which city does {Name} live in now?", "Where is {Name} based these days?"],
             "new": [3], "old": [0]},
            {"q": ["Which neighbourhood is {Name}'s flat in?",
                   "What area of {to_city} did {Name} end up living in?"],
             "new": [2, 4], "old": [1]},
        ],
    },
    "job": {
        "tags": ["work", "career"],
        "stages": [
            {"label": ["fed up at work", "work frustrations"],
             "text": ["Work at {old_job} is getting {me} down. {old_boss} announced another "
                      "reorganisation and {my} team is being merged with {merge_team}. || {Su} "
                      "{is} starting to look at job adverts in the evenings, just to see "
                      "what's out there."],
             "single": ["Which team was {Name}'s team being merged with at {old_job}?"],
             "para": ["Why was {Name} unhappy with {her} employer?"]},
            {"label": ["job interview", "interview at {new_job}"],
             "text": ["{U} had a first interview at {new_job} for a {new_role} role. || "
                      "Forty-five minutes on video, mostly friendly. They asked a lot about "
                      "{interview_topic}. {Su} think{s} it went okay but can't tell."],
             "single": ["What role did {Name} interview for at {new_job}?",
                        "What did the interviewers at {new_job} ask about?"],
             "para": []},
            {"label": ["second interview", "task for {new_job}"],
             "text": ["Second round at {new_job}: a take-home task on {task}, then a panel. "
                      "|| {Su} stayed up too late polishing it. The panel included the "
                      "person who would be {my} manager, {new_boss}, who seemed sharp and "
                      "kind."],
             "single": ["What was the take-home task for {new_job} about?"],
             "para": []},
            {"label": ["job offer!", "offer accepted"],
             "text": ["{new_job} made an offer and {U} accepted! A decent raise, and "
                      "{perk}. || Start date is {start_date}. Now {u} just {has} to tell "
                      "{old_boss}, which {u} {is} dreading."],
             "single": ["When does {Name} start at {new_job}?",
                        "What perk came with the {new_job} offer?"],
             "para": ["What good news did {Name} get about changing employers?"],
             "state": {"employer": "{new_job}"}},
            {"label": ["first week at {new_job}", "new job, first week"],
             "text": ["First week at {new_job} done. {U} {has} a desk by the window and a "
                      "laptop that actually works. || {new_boss} took the team out for lunch "
                      "on Wednesday. Still learning everyone's names; there are a lot of "
                      "acronyms."],
             "single": ["Where did {new_boss} take the team on {Name}'s first week?"],
             "para": []},
        ],
        "latest": ["How is {Name}'s new job going?"],
        "superseded": [
            {"q": ["Where does {Name} work now?", "Who is {Name}'s employer at the moment?"],
             "new": [3, 4], "old": [0]},
            {"q": ["Who is {Name}'s manager now?", "Who does {Name} report to these days?"],
             "new": [2, 4], "old": [0]},
        ],
    },
    "race": {
        "tags": ["running", "training"],
        "stages": [
            {"label": ["signed up for {race}", "race entry"],
             "text": ["{U} signed up for {race}, which is on {race_date}. Goal: under "
                      "{goal1}. || {friend} is doing it too, so there's no backing out now. "
                      "{Su} downloaded a sixteen-week plan."],
             "single": ["Which race did {Name} sign up for?"],
             "para": []},
            {"label": ["long run", "training update"],
             "text": ["Training update: {U} did {run1} on Sunday along the river. || Legs "
                      "felt heavy for the first half, then fine. Tried energy gels for the "
                      "first time; the lemon ones are awful."],
             "single": ["What energy gels did {Name} dislike?"],
             "para": []},
            {"label": ["long run", "training"],
             "text": ["Longest run yet: {run2}. {U} went out early before it got hot. || "
                      "Averaged a pace {u} was pleased with and had enough left for a sprint "
                      "at the end."],
             "single": [], "para": []},
            {"label": ["injury", "physio"],
             "text": ["Bad news: {injury}. {U} felt it on a short run and stopped. || The "
                      "physio, {physio}, says two weeks off running, lots of stretching, "
                      "and swimming if {u} want{s} to keep fit. {Su} {is} grumpy about it."],
             "single": ["What injury did {Name} get while training for {race}?",
                        "Who is {Name}'s physio?"],
             "para": ["Why did {Name} have to stop running for a couple of weeks?"]},
            {"label": ["back running", "new race goal"],
             "text": ["Back running after the injury, carefully. {U} did {run3} with no "
                      "pain. || Given the lost weeks, {u} changed the goal for {race}: now "
                      "just under {goal2} and enjoying it."],
             "single": [], "para": []},
            {"label": ["race day!", "{race} done"],
             "text": ["{race} done! {U} finished in {finish}. || The last three miles were "
                      "brutal, but the crowd was amazing and {friend} waited at the finish "
                      "with a banana and a hug. Medal is on the fridge."],
             "single": ["What was {Name}'s finishing time in {race}?"],
             "para": ["How fast did {Name} complete the big event {she} trained for?"]},
        ],
        "latest": ["How did {Name}'s most recent run go?",
                   "What's the latest on {Name}'s running?"],
        "superseded": [
            {"q": ["What finish time was {Name} aiming for in {race}?",
                   "What was {Name}'s target for {race} in the end?"],
             "new": [4], "old": [0]},
        ],
    },
    "project": {
        "tags": ["side-project"],
        "stages": [
            {"label": ["new idea: {project}", "{project} idea"],
             "text": ["{U} {has} an idea for a side project: {project}, {project_what}. "
                      "|| {Su} talked it through with {friend}, who was enthusiastic and "
                      "offered to help with {help}."],
             "single": ["What is {Name}'s side project {project}?"],
             "para": []},
            {"label": ["{project} progress", "first version of {project}"],
             "text": ["First rough version of {project} is done. {U} spent three evenings "
                      "on it. || It's ugly but it works, mostly. The hardest part was "
                      "{hard_part}."],
             "single": ["What was the hardest part of the first version of {project}?"],
             "para": []},
            {"label": ["feedback on {project}", "{project} testers"],
             "text": ["Showed {project} to a handful of people. Feedback: they love "
                      "{liked}, nobody understood {confusing}. || {Su} {has} a list of "
                      "fixes as long as {my} arm."],
             "single": ["What did testers find confusing about {project}?"],
             "para": []},
            {"label": ["{project} setback", "stalled"],
             "text": ["{project} has stalled. {setback}. || {Su} {is} not giving up, but "
                      "it's on hold for a few weeks."],
             "single": ["Why did {project} stall?"],
             "para": []},
            {"label": ["{project} launched", "{project} milestone"],
             "text": ["Big milestone: {milestone}. || {U} celebrated with takeaway and "
                      "a very small glass of something fizzy."],
             "single": ["What milestone did {project} reach?"],
             "para": []},
        ],
        "latest": ["What's the latest on {project}?", "How is {project} going?"],
        "superseded": [],
    },
    "reno": {
        "tags": ["home", "renovation"],
        "stages": [
            {"label": ["{room} quotes", "renovation plans"],
             "text": ["Got two quotes for redoing the {room}: {builder1} and {builder2}. || "
                      "{builder2} is cheaper but can't start until after the summer. {U} "
                      "{is} leaning towards paying more to get it done sooner."],
             "single": ["Which builders quoted for {Name}'s {room}?"],
             "para": []},
            {"label": ["{room}: builder chosen", "colour decided"],
             "text": ["Went with {builder1}. {U} chose {colour1} for the {room}, after "
                      "about forty sample pots. || Work starts in three weeks."],
             "single": ["Which builder did {Name} choose for the {room}?"],
             "para": []},
            {"label": ["{room} delays", "renovation chaos"],
             "text": ["The {room} renovation is behind schedule: {delay}. || {U} {has} been "
                      "washing up in the bathroom sink. Also changed {my} mind on the colour "
                      "and went with {colour2} in the end, which the painter took very "
                      "graciously."],
             "single": ["What caused the delay in {Name}'s {room} renovation?"],
             "para": []},
            {"label": ["{room} finished", "renovation done"],
             "text": ["The {room} is finished! {U} {is} ridiculously happy with it. || The "
                      "{feature2} is the best bit. {Su} had friends round to show it off."],
             "single": ["What is {Name}'s favourite part of the finished {room}?"],
             "para": []},
        ],
        "latest": ["How is {Name}'s {room} renovation going?",
                   "What's the latest with the {room}?"],
        "superseded": [
            {"q": ["What colour did {Name} pick for the {room}?",
                   "What colour did {Name} go with for the {room} in the end?"],
             "new": [2], "old": [1]},
        ],
    },
    "language": {
        "tags": ["learning", "{lang_tag}"],
        "stages": [
            {"label": ["learning {lang}", "{lang} lessons"],
             "text": ["{U} started learning {lang}, mostly with an app in the mornings. || "
                      "{Su} {is} on a twelve-day streak and can order coffee and apologise, "
                      "which covers most situations."],
             "single": ["Which language did {Name} start learning?"],
             "para": []},
            {"label": ["{lang} tutor", "tutor found"],
             "text": ["Found a {lang} tutor online, {tutor}, who does evening lessons over "
                      "video. || First lesson was humbling. {tutor} says {my} pronunciation "
                      "is good but {my} grammar is chaos."],
             "single": ["What is the name of {Name}'s {lang} tutor?"],
             "para": []},
            {"label": ["{lang} exam booked", "exam plans"],
             "text": ["{U} booked the {level} exam for {exam1}. || {tutor} thinks it's "
                      "achievable with two lessons a week."],
             "single": [], "para": []},
            {"label": ["exam postponed", "{lang} exam moved"],
             "text": ["{U} moved the {lang} exam to {exam2}; the first date clashed with "
                      "{clash}. || Relief, honestly. More time for the listening part, "
                      "which is the weakest."],
             "single": ["Why did {Name} move the {lang} exam?"],
             "para": []},
            {"label": ["{lang} exam result", "passed!"],
             "text": ["Passed the {level} {lang} exam! {U} got the result this morning. || "
                      "Speaking was the best section, listening the worst, as predicted. "
                      "Celebrated with {tutor} in the last lesson."],
             "single": ["Did {Name} pass the {lang} exam?"],
             "para": []},
        ],
        "latest": ["How is {Name}'s {lang} coming along?"],
        "superseded": [
            {"q": ["When was {Name}'s {lang} exam in the end?",
                   "What date was {Name}'s {lang} exam moved to?"], "new": [3], "old": [2]},
        ],
    },
    "pet": {
        "tags": ["pets"],
        "stages": [
            {"label": ["shelter visit", "thinking about a {animal}"],
             "text": ["{U} went to the rescue centre just to look, which everyone knows is "
                      "a lie. || There's a {animal} called {pet} who apparently has "
                      "{pet_trait}. {Su} {is} going back on Saturday."],
             "single": ["What is the {animal} {Name} saw at the shelter called?"],
             "para": []},
            {"label": ["{pet} came home", "new {animal}"],
             "text": ["{pet} came home this week! Spent the first night under the sofa. || "
                      "By day three {pet} had claimed the armchair. {U} bought far too many "
                      "toys."],
             "single": [], "para": ["When did {Name}'s new pet move in?"]},
            {"label": ["vet visit", "{pet} at the vet"],
             "text": ["{pet} had to go to the vet: {vet_issue}. || Nothing serious, but the "
                      "bill was painful and {pet} sulked all evening."],
             "single": ["Why did {pet} go to the vet?"],
             "para": []},
            {"label": ["{pet} update", "{pet} and training"],
             "text": ["{pet} update: {pet_news}. || {U} {is} pleased; the neighbours "
                      "probably more so."],
             "single": [], "para": []},
        ],
        "latest": ["How is {pet} doing?", "Any news about {Name}'s {animal}?"],
        "superseded": [],
    },
    "health": {
        "tags": ["health"],
        "stages": [
            {"label": ["doctor's appointment", "GP"],
             "text": ["{U} finally saw the GP about {symptom}. || Blood tests booked for next "
                      "week. The doctor didn't seem worried, which helps."],
             "single": ["What did {Name} see the GP about?"],
             "para": []},
            {"label": ["test results", "diagnosis"],
             "text": ["Results back: {diagnosis}. || The doctor started {me} on {med1}. "
                      "{Su} {has} to go back in six weeks."],
             "single": ["What was {Name} diagnosed with?"],
             "para": []},
            {"label": ["medication change", "follow-up"],
             "text": ["Follow-up appointment. {med1} was giving {me} {side_effect}, so the "
                      "doctor switched {me} to {med2}. || Fingers crossed this one is "
                      "better."],
             "single": ["What side effect did {med1} give {Name}?"],
             "para": []},
            {"label": ["feeling better", "health update"],
             "text": ["Feeling much better lately. {med2} seems to suit {me}, and {U} {has} "
                      "more energy. || Next check-up in three months."],
             "single": [], "para": []},
        ],
        "latest": ["How is {Name}'s health lately?"],
        "superseded": [
            {"q": ["What medication is {Name} taking now?",
                   "What treatment is {Name} currently on?"], "new": [2, 3], "old": [1]},
        ],
    },
    "wedding": {
        "tags": ["family", "wedding"],
        "stages": [
            {"label": ["{sibling} engaged!", "engagement"],
             "text": ["Big family news: {my} {sibling_rel} {sibling} got engaged to {fiance}! "
                      "|| They're thinking about a wedding at {venue1} next year. {U} {has} "
                      "been asked to be {role}."],
             "single": ["Who did {sibling} get engaged to?",
                        "What role will {Name} have at {sibling}'s wedding?"],
             "para": []},
            {"label": ["wedding venue change", "{sibling}'s wedding plans"],
             "text": ["{sibling}'s wedding plans have changed: {venue1} was double-booked, so "
                      "it's now at {venue2} on {wedding_date}. || {U} {has} started thinking "
                      "about the speech, meaning {u} opened a blank document and closed it "
                      "again."],
             "single": ["Why did {sibling} have to change wedding venue?"],
             "para": []},
            {"label": ["wedding speech", "speech writing"],
             "text": ["Working on the speech for {sibling}'s wedding. {U} {has} a story about "
                      "{speech_story} that will either kill or die. || Practised it on "
                      "{friend}, who laughed, politely."],
             "single": ["What story is {Name} telling in the wedding speech?"],
             "para": []},
            {"label": ["{sibling}'s wedding", "wedding day"],
             "text": ["{sibling} and {fiance}'s wedding was perfect. {U} got through the "
                      "speech without crying until the very end. || {wedding_moment}. Danced "
                      "until {my} feet gave up."],
             "single": ["What was the memorable moment at {sibling}'s wedding?"],
             "para": []},
        ],
        "latest": ["What's the latest on {sibling}'s wedding?"],
        "superseded": [
            {"q": ["Where was {sibling}'s wedding held in the end?",
                   "What was the venue for {sibling}'s wedding?"], "new": [1], "old": [0]},
        ],
    },
    "trip_plan": {
        "tags": ["travel", "holiday"],
        "stages": [
            {"label": ["summer holiday plans", "holiday ideas"],
             "text": ["Holiday planning: {companion} and {U} are thinking about {dest1} in "
                      "{trip_month}. || Two weeks, mostly slow days and doing nothing much, with "
                      "maybe one day of sightseeing."],
             "single": [], "para": []},
            {"label": ["holiday plans changed", "new holiday plan"],
             "text": ["Change of plan for the summer: flights to {dest1} doubled in price, so "
                      "it's {dest2} instead. || {U} booked {lodging} near the old town. "
                      "{companion} is already making spreadsheets."],
             "single": ["Why did {Name} change the summer holiday plans?",
                        "Where is {Name} staying on the holiday?"],
             "para": []},
            {"label": ["back from {dest2}", "holiday recap"],
             "text": ["Back from {dest2}! {U} came home tanned and tired. || Best day: "
                      "{best_day}. Worst: {worst_day}."],
             "single": ["What was the best day of {Name}'s holiday in {dest2}?"],
             "para": []},
        ],
        "latest": [],
        "superseded": [
            {"q": ["Where did {Name} go on the summer holiday in the end?",
                   "Where did {Name} decide to go for the summer trip?"],
             "new": [1, 2], "old": [0]},
        ],
    },
}

# Recurring activities: mentioned in many sessions, each time with one detail.
# `latest` asks for the most recent mention.
HABITS: dict[str, dict[str, Any]] = {
    "climbing": {
        "tags": ["climbing"], "label": ["climbing", "bouldering session"],
        "latest": ["When did {Name} last go climbing, and how was it?",
                   "How did {Name}'s latest climbing session go?"],
        "mentions": [
            ("Climbing at {place} on Thursday: {U} finally topped the orange overhang "
             "problem after three weeks of falling off it.",
             "Which bouldering problem did {Name} finally top after weeks of trying?"),
            ("Went to {place} with {buddy}; {u} tweaked a finger on a tiny crimp and "
             "had to stop early.", "How did {Name} hurt a finger climbing?"),
            ("Quick session at {place}. They reset the whole wall, so everything is new "
             "and {U} couldn't do half of it.", ""),
            ("{buddy} and {U} tried the outdoor crag for the first time; rock is much "
             "scarier than plastic.", "Where did {Name} climb outdoors for the first time?"),
            ("Climbing was packed tonight; {U} spent more time queuing than climbing.", ""),
            ("Did a lead-climbing induction at {place}, so {u} can clip ropes now. "
             "Terrifying, brilliant.", "What climbing course did {Name} complete?"),
            ("Short bouldering session at {place} after work, nothing special, mostly "
             "warm-ups.", ""),
        ],
    },
    "choir": {
        "tags": ["choir", "music"], "label": ["choir", "rehearsal"],
        "latest": ["How did {Name}'s most recent choir rehearsal go?",
                   "When was {Name}'s last choir practice?"],
        "mentions": [
            ("Choir on Tuesday: {we} started learning {piece} for the winter concert. The "
             "altos are struggling with the middle section.",
             "What piece did {Name}'s choir start learning for the winter concert?"),
            ("{U} got asked to sing a short solo at choir. Said yes, instantly regretted it.",
             "What did {Name} get asked to do at choir?"),
            ("Choir was cancelled because the hall was double-booked; {we} went to the pub "
             "instead.", ""),
            ("Rehearsal ran late; the conductor, {buddy}, made {us} repeat the last page "
             "eleven times.", ""),
            ("Choir concert was on Saturday. {U} didn't mess up the solo. Mostly.",
             "How did {Name}'s choir solo go?"),
            ("New term at choir, new music, and a bass section that finally has more than "
             "two people in it.", ""),
        ],
    },
    "football": {
        "tags": ["football", "sport"], "label": ["five-a-side", "football"],
        "latest": ["How did {Name}'s last five-a-side game go?",
                   "What happened at {Name}'s most recent football match?"],
        "mentions": [
            ("Five-a-side on Wednesday: lost 7-3, but {U} scored one, so a personal win.",
             "What was the score when {Name}'s team lost 7-3?"),
            ("Football was rained off; the pitch was a lake.", ""),
            ("Five-a-side went well, won 5-4 with a last-minute goal from {buddy}.",
             "Who scored the winner in {Name}'s 5-4 game?"),
            ("{U} rolled an ankle at five-a-side. Nothing serious, iced it at home.",
             "How did {Name} hurt an ankle?"),
            ("New team shirts for five-a-side arrived. They're orange. Nobody voted for "
             "orange.", "What colour are the new five-a-side shirts?"),
            ("Football tonight, a draw, everyone knackered.", ""),
        ],
    },
    "swimming": {
        "tags": ["swimming"], "label": ["swim", "pool"],
        "latest": ["When did {Name} last go swimming?",
                   "How was {Name}'s most recent swim?"],
        "mentions": [
            ("Morning swim at {place}: forty lengths, a new record for {me}.",
             "How many lengths did {Name} swim to set a personal record?"),
            ("Tried sea swimming with {buddy}. Freezing, but {U} stayed in for ten minutes.",
             "Who did {Name} go sea swimming with?"),
            ("Pool was closed for cleaning, so {U} went for a walk instead.", ""),
            ("Swim after work; the lane was full of very fast people and {U} felt slow.", ""),
            ("Joined the adult improvers' group at {place} to fix {my} breaststroke kick.",
             "What swimming group did {Name} join?"),
        ],
    },
    "pub_quiz": {
        "tags": ["quiz"], "label": ["pub quiz", "quiz night"],
        "latest": ["How did {Name}'s latest pub quiz go?",
                   "When was the last quiz night {Name} went to?"],
        "mentions": [
            ("Pub quiz at {place}: came third, lost it all on the music round.",
             "Which round lost {Name}'s team the quiz when they came third?"),
            ("Quiz team finally won! The prize was a bar tab, which lasted about an hour.",
             "What was the prize when {Name}'s quiz team won?"),
            ("Quiz night; {buddy} knew every capital city, {U} knew nothing.", ""),
            ("{Our} quiz team has a new name: {team}. It seemed funnier at the time.",
             "What is {Name}'s quiz team called?"),
            ("Quiz was fine, mid-table, good chips.", ""),
        ],
    },
    "allotment": {
        "tags": ["garden", "allotment"], "label": ["allotment", "garden update"],
        "latest": ["What's the latest from {Name}'s allotment?",
                   "When did {Name} last work on the allotment?"],
        "mentions": [
            ("Allotment: {U} planted out the tomatoes and the beans. Slugs already "
             "circling.", "What did {Name} plant out at the allotment?"),
            ("Picked the first courgettes. There will be too many, there are always too many.",
             "What was the first crop {Name} picked?"),
            ("Someone stole the pumpkins from the allotment overnight. Who steals pumpkins?",
             "What was stolen from {Name}'s allotment?"),
            ("Spent Sunday digging compost into the allotment beds. Back is complaining.", ""),
            ("{buddy} from the next plot gave {me} rhubarb crowns.",
             "What did {Name}'s allotment neighbour give {him}?"),
            ("Allotment mostly weeding this week.", ""),
        ],
    },
}
