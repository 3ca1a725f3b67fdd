//! Who the metrics endpoint serves at once. A fixed number of places, so scrapes are
//! bounded in threads; and when every place is taken, the oldest client that has still not
//! sent its request gives up its place to the newcomer. A peer that opens sockets and stays
//! silent therefore cannot keep a real scraper out: a scraper sends its request at once,
//! and the silent sockets are the ones that make room. Sans-IO: `H` is whatever closes a
//! client (a socket's clone, to shut down).

/// The places and their holders.
#[derive(Debug)]
pub struct Admission<H> {
    max: usize,
    next: u64,
    /// In arrival order.
    held: Vec<Place<H>>,
}

#[derive(Debug)]
struct Place<H> {
    id: u64,
    handle: H,
    /// Its request has not arrived yet.
    silent: bool,
}

/// A client let in: its number, and the silent client it displaced, to be closed.
#[derive(Debug)]
pub struct Admitted<H> {
    /// What [`Admission::spoke`] and [`Admission::leave`] take.
    pub id: u64,
    /// Close this one: it gave up its place.
    pub displaced: Option<H>,
}

impl<H> Admission<H> {
    /// At most `max` clients at once.
    pub fn new(max: usize) -> Self {
        Self {
            max: max.max(1),
            next: 0,
            held: Vec::new(),
        }
    }

    /// Lets `handle`'s client in, displacing the oldest silent one if every place is taken.
    ///
    /// # Errors
    /// Every place is held by a client that has sent its request: `handle` comes back, to
    /// be answered 503.
    pub fn admit(&mut self, handle: H) -> Result<Admitted<H>, H> {
        let mut displaced = None;
        if self.held.len() >= self.max {
            let Some(oldest) = self.held.iter().position(|p| p.silent) else {
                return Err(handle);
            };
            displaced = Some(self.held.remove(oldest).handle);
        }
        let id = self.next;
        self.next += 1;
        self.held.push(Place {
            id,
            handle,
            silent: true,
        });
        Ok(Admitted { id, displaced })
    }

    /// Client `id` sent its whole request: it keeps its place until it leaves.
    pub fn spoke(&mut self, id: u64) {
        if let Some(place) = self.held.iter_mut().find(|p| p.id == id) {
            place.silent = false;
        }
    }

    /// Client `id` is gone (answered, failed, or displaced already).
    pub fn leave(&mut self, id: u64) {
        self.held.retain(|p| p.id != id);
    }

    /// Clients holding a place.
    pub fn len(&self) -> usize {
        self.held.len()
    }

    /// True iff nobody holds a place.
    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn silent_clients_make_room_for_a_newcomer_and_speaking_ones_keep_their_place() {
        let mut places = Admission::new(3);
        let silent: Vec<u64> = (0..3).map(|i| places.admit(i).unwrap().id).collect();
        // Full of silent sockets: a scraper still gets in, displacing the oldest.
        let scraper = places.admit(10).unwrap();
        assert_eq!(scraper.displaced, Some(0));
        places.spoke(scraper.id);
        // The silent ones keep being displaced, oldest first; the scraper never is.
        assert_eq!(places.admit(11).unwrap().displaced, Some(1));
        assert_eq!(places.admit(12).unwrap().displaced, Some(2));
        assert_eq!(places.admit(13).unwrap().displaced, Some(11));
        assert_eq!(places.len(), 3);
        places.leave(silent[0]);
        assert_eq!(
            places.len(),
            3,
            "a displaced client leaving frees nothing twice"
        );
    }

    #[test]
    fn places_held_by_clients_that_spoke_turn_newcomers_away() {
        let mut places = Admission::new(2);
        for i in 0..2 {
            let a = places.admit(i).unwrap();
            places.spoke(a.id);
        }
        assert_eq!(places.admit(9).unwrap_err(), 9);
        places.leave(0);
        assert!(places.admit(9).is_ok());
    }
}
