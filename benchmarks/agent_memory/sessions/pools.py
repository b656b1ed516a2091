"""Values the templates are filled with. Each persona draws its own without
replacement, so within one conversation a value names one thing. '¤' is the
persona's currency sign. All names are made up."""

from typing import Any

CITIES = [
    {"name": "Porto", "sight": "the Dom Luís bridge", "food": "custard tarts"},
    {"name": "Ghent", "sight": "the castle", "food": "waffles"},
    {"name": "Bologna", "sight": "the two towers", "food": "tortellini"},
    {"name": "Ljubljana", "sight": "the castle hill", "food": "burek"},
    {"name": "Seville", "sight": "the cathedral tower", "food": "tapas"},
    {"name": "Edinburgh", "sight": "Arthur's Seat", "food": "fish and chips"},
    {"name": "Copenhagen", "sight": "the old harbour", "food": "smørrebrød"},
    {"name": "Kraków", "sight": "the old market square", "food": "pierogi"},
    {"name": "Lyon", "sight": "the basilica on the hill", "food": "quenelles"},
    {"name": "Valencia", "sight": "the old riverbed park", "food": "paella"},
    {"name": "Vienna", "sight": "the palace gardens", "food": "apple strudel"},
    {"name": "Galway", "sight": "the Long Walk", "food": "oysters"},
    {"name": "Tallinn", "sight": "the old town walls", "food": "black bread"},
    {"name": "Naples", "sight": "the castle by the sea", "food": "pizza"},
    {"name": "Antwerp", "sight": "the cathedral", "food": "chips with mayonnaise"},
    {"name": "Hamburg", "sight": "the warehouse district", "food": "fish rolls"},
    {"name": "Bordeaux", "sight": "the water mirror", "food": "canelés"},
    {"name": "Budapest", "sight": "the thermal baths", "food": "lángos"},
    {"name": "York", "sight": "the city walls", "food": "Yorkshire puddings"},
    {"name": "Granada", "sight": "the Alhambra", "food": "free tapas"},
]

RESTAURANTS = [
    {"name": "Olive & Ash", "cuisine": "Lebanese", "dish": "lamb kofta"},
    {"name": "Kin Noodle Bar", "cuisine": "Vietnamese", "dish": "crispy pork bánh mì"},
    {"name": "Casa Lupe", "cuisine": "Mexican", "dish": "fish tacos"},
    {"name": "The Copper Pan", "cuisine": "modern British", "dish": "pork belly"},
    {"name": "Saffron House", "cuisine": "Persian", "dish": "saffron rice with barberries"},
    {"name": "Hanami", "cuisine": "Japanese", "dish": "black cod"},
    {"name": "Trattoria Nonna Rita", "cuisine": "Italian", "dish": "cacio e pepe"},
    {"name": "Little Tbilisi", "cuisine": "Georgian", "dish": "khachapuri"},
    {"name": "Green Room", "cuisine": "vegan", "dish": "mushroom 'steak'"},
    {"name": "Seoul Kitchen", "cuisine": "Korean", "dish": "fried chicken"},
    {"name": "Mesa", "cuisine": "Peruvian", "dish": "ceviche"},
    {"name": "Bistro Amandine", "cuisine": "French", "dish": "duck confit"},
    {"name": "Dosa Junction", "cuisine": "South Indian", "dish": "masala dosa"},
    {"name": "The Smokehouse", "cuisine": "barbecue", "dish": "brisket"},
    {"name": "Aegean Table", "cuisine": "Greek", "dish": "grilled octopus"},
]

BOOKS = [
    {"title": "The Salt Orchard", "author": "Helen Marsh", "genre": "a family saga"},
    {"title": "Nine Bridges North", "author": "Tomas Eklund", "genre": "a Nordic thriller"},
    {"title": "A Small Gravity", "author": "Ruth Adeyemi", "genre": "literary fiction"},
    {"title": "The Cartographer's Dog", "author": "Ian Wexley", "genre": "a comic novel"},
    {"title": "Glass Weather", "author": "Mira Castell", "genre": "science fiction"},
    {"title": "What the River Kept", "author": "Joanna Pike", "genre": "a mystery"},
    {"title": "The Quiet Engine", "author": "Dev Malhotra", "genre": "historical fiction"},
    {"title": "Paper Lanterns", "author": "Aiko Mori", "genre": "short stories"},
    {"title": "The Long Field", "author": "Seamus Doyle", "genre": "a memoir"},
    {"title": "Under the Orchard Wall", "author": "Clara Fenn", "genre": "a murder mystery"},
    {"title": "Copper Sky", "author": "Luis Ortega", "genre": "a road-trip novel"},
    {"title": "The Last Ferry", "author": "Nadia Berg", "genre": "a psychological thriller"},
]

FILMS = [
    {"title": "Low Tide", "kind": "a slow Irish drama"},
    {"title": "The Orbit Men", "kind": "a big space blockbuster"},
    {"title": "Marigold", "kind": "a romantic comedy"},
    {"title": "Static", "kind": "a horror film"},
    {"title": "Ferryman", "kind": "a heist film"},
    {"title": "Little Bear Mountain", "kind": "an animated film"},
    {"title": "The Fifth Window", "kind": "a courtroom drama"},
    {"title": "Blue Hour", "kind": "a French art-house film"},
]

BANDS = [
    {"name": "The Lanterns", "venue": "the Roundhouse"},
    {"name": "Mila Vance", "venue": "the Corn Exchange"},
    {"name": "Northern Static", "venue": "a tiny basement club"},
    {"name": "Harbour Lights", "venue": "the cathedral"},
    {"name": "Velvet Orchard", "venue": "the summer festival"},
    {"name": "DJ Kestrel", "venue": "the old warehouse"},
    {"name": "The Brass Foxes", "venue": "the town hall"},
    {"name": "Solenne", "venue": "the arena"},
]

TRAILS = [
    {"name": "Kinder Scout", "region": "the Peak District", "km": 15, "animal": "mountain hares"},
    {"name": "Striding Edge", "region": "the Lake District", "km": 14, "animal": "a buzzard"},
    {"name": "Seven Sisters", "region": "the South Downs", "km": 21, "animal": "a seal"},
    {"name": "Pen y Fan horseshoe", "region": "the Brecon Beacons", "km": 16,
     "animal": "wild ponies"},
    {"name": "Malham Cove loop", "region": "the Dales", "km": 11, "animal": "a peregrine"},
    {"name": "Saxon Switzerland ridge", "region": "Saxony", "km": 18, "animal": "a deer"},
    {"name": "Ben Lomond", "region": "the Trossachs", "km": 12, "animal": "red deer"},
    {"name": "Jurassic Coast path", "region": "Dorset", "km": 19, "animal": "dolphins"},
    {"name": "Tatra valley trail", "region": "the Tatras", "km": 17, "animal": "a marmot"},
]

PURCHASES = [
    {"item": "a second-hand road bike", "short": "bike", "price": "¤450"},
    {"item": "a proper standing desk", "short": "desk", "price": "¤380"},
    {"item": "a new laptop", "short": "laptop", "price": "¤1,100"},
    {"item": "a sofa bed for the spare room", "short": "sofa bed", "price": "¤650"},
    {"item": "an espresso machine", "short": "espresso machine", "price": "¤320"},
    {"item": "hiking boots and a waterproof jacket", "short": "hiking gear", "price": "¤290"},
    {"item": "a secondhand piano", "short": "piano", "price": "¤900"},
    {"item": "a tent for festivals", "short": "tent", "price": "¤210"},
    {"item": "a good camera", "short": "camera", "price": "¤780"},
    {"item": "an electric cargo bike", "short": "cargo bike", "price": "¤2,400"},
]

PLACES_LOST = ["in the fridge, next to the butter", "in the pocket of the other coat",
               "inside a shoe in the hallway", "in the bag for life in the car boot",
               "on the bathroom windowsill"]
DENTAL = ["a filling in a back tooth", "a root canal", "a crown replaced",
          "a wisdom tooth out"]
VOLUNTEERING = [
    {"name": "the food bank on Mill Street", "short": "food bank",
     "task": "Sorting tins and packing parcels for three hours"},
    {"name": "the animal shelter", "short": "animal shelter",
     "task": "Walking dogs and cleaning out kennels"},
    {"name": "the community garden", "short": "garden",
     "task": "Digging new beds and weeding the herb patch"},
    {"name": "a river clean-up", "short": "river clean-up",
     "task": "Fishing shopping trolleys and crisp packets out of the water"},
    {"name": "the library homework club", "short": "homework club",
     "task": "Helping kids with maths homework after school"},
]
EXHIBITIONS = [
    {"name": "Vikings: Sea and Storm", "short": "Vikings", "highlight": "a reconstructed "
     "longship"},
    {"name": "Hokusai prints", "short": "Hokusai", "highlight": "the great wave, much smaller "
     "than expected"},
    {"name": "Body Worlds", "short": "Body Worlds", "highlight": "the plastinated horse"},
    {"name": "Women of the Bauhaus", "short": "Bauhaus", "highlight": "the weaving room"},
    {"name": "Frida Kahlo's letters", "short": "Frida Kahlo", "highlight": "her painted "
     "corset"},
    {"name": "Dinosaurs of the Jurassic Coast", "short": "dinosaur",
     "highlight": "a giant ichthyosaur skull"},
]
WORKSHOPS = [
    {"name": "pottery wheel", "short": "pottery", "teacher": "Bernadette",
     "result": "a lopsided mug"},
    {"name": "bread baking", "short": "bread", "teacher": "Marco", "result": "two sourdough "
     "loaves"},
    {"name": "life drawing", "short": "drawing", "teacher": "Oluwaseun", "result": "a "
     "folder of sketches"},
    {"name": "woodworking", "short": "woodwork", "teacher": "Gareth", "result": "a small "
     "stool"},
    {"name": "screen printing", "short": "printing", "teacher": "Inès", "result": "three "
     "tote bags"},
    {"name": "stained glass", "short": "stained glass", "teacher": "Hilde",
     "result": "a suncatcher shaped like a leaf"},
]
VENUES = ["a barn in the countryside", "an old mill by the river", "a botanical garden",
          "a castle hotel", "a village church and a pub", "a beach hut on the coast"]
GIFTS = ["a vintage record player", "a cooking class voucher", "a hand-knitted scarf",
         "a framed map of their home town", "concert tickets", "a fancy bottle of gin"]
CAR_FAULTS = ["a dead alternator", "a cracked exhaust", "the clutch going",
              "a flat battery and a leaking radiator"]
PLANTS = ["a huge monstera", "a fiddle-leaf fig", "a lemon tree in a pot", "a spider plant",
          "a bonsai juniper"]
FINES = ["¤70", "¤35", "¤60", "¤50"]
GAMES = ["Wingspan", "Codenames", "Ticket to Ride", "Catan", "Azul", "Pandemic"]
DISHES_HOME = ["a big lasagne", "roast chicken with all the trimmings", "a lamb tagine",
               "a fish curry", "stuffed peppers"]
CONFERENCES = [  # personas name their own (people.py); these are the fallback
    {"name": "DataConf", "short": "DataConf", "topic": "cleaning messy survey data"},
    {"name": "the regional nursing summit", "short": "nursing", "topic": "night-shift "
     "handovers"},
    {"name": "EdTech Live", "short": "EdTech", "topic": "phones in classrooms"},
    {"name": "the Design Systems Forum", "short": "design systems", "topic": "accessible "
     "colour palettes"},
    {"name": "PyCon", "short": "PyCon", "topic": "testing legacy code"},
    {"name": "the Bakery Trade Fair", "short": "trade fair", "topic": "sourdough at scale"},
]
HAIRCUTS = ["a short bob", "a buzz cut", "a fringe for the first time in years",
            "blonde highlights", "an undercut"]
THEFT_PLACES = ["outside the train station", "from the gym car park",
                "from the back yard, overnight", "outside the supermarket"]
AMBITIOUS_DISHES = ["fresh ramen with a broth that took six hours", "croissants",
                    "a beef Wellington", "handmade ravioli", "a three-layer birthday cake"]
KIDS = ["Ruby", "Ollie", "Ava", "Leo", "Isla", "Finn", "Zara", "Noah"]

POOLS: dict[str, list[Any]] = {
    "cities": CITIES, "restaurants": RESTAURANTS, "books": BOOKS, "films": FILMS,
    "bands": BANDS, "trails": TRAILS, "purchases": PURCHASES, "places_lost": PLACES_LOST,
    "dental": DENTAL, "volunteering": VOLUNTEERING, "exhibitions": EXHIBITIONS,
    "workshops": WORKSHOPS, "venues": VENUES, "gifts": GIFTS, "car_faults": CAR_FAULTS,
    "plants": PLANTS, "fines": FINES, "games": GAMES, "dishes_home": DISHES_HOME,
    "conferences": CONFERENCES, "haircuts": HAIRCUTS, "theft_places": THEFT_PLACES,
    "ambitious_dishes": AMBITIOUS_DISHES, "kids": KIDS,
}
