//! The client's Contacts service: the users a caller keeps under her own names. Importing
//! finds users by phone, so it obeys their FIND_BY_PHONE rules and the caller's lookup
//! limit; each added, renamed or deleted contact is an update in her log.

use std::{collections::HashMap, sync::Arc};

use oxigram_errors::{Error, ErrorCode, check_text, page_limit, status};
use oxigram_proto::{
    api::v1::{
        ContactList, ContactsChanged, DeleteContactsRequest, GetContactsRequest,
        ImportContactsRequest, ImportedContact, ImportedContacts, contacts_server::Contacts,
    },
    types::v1::{UpdateContact, update},
};
use tonic::{Request, Response, Status};

use crate::{
    Gateway,
    people::{self, ContactName},
    profile,
};

/// Most contacts one import or delete may name.
pub const MAX_CONTACTS_PER_CALL: usize = 1000;
/// Most contacts one GetContacts page returns.
pub const MAX_CONTACTS_PAGE: i32 = 100;

pub struct ContactsApi(pub Arc<Gateway>);

fn contact_update(c: ContactName) -> update::Kind {
    update::Kind::Contact(UpdateContact {
        user_id: c.contact_user_id,
        first_name: c.first_name,
        last_name: c.last_name,
        deleted: false,
    })
}

#[tonic::async_trait]
impl Contacts for ContactsApi {
    async fn import_contacts(
        &self,
        request: Request<ImportContactsRequest>,
    ) -> Result<Response<ImportedContacts>, Status> {
        let (me, r) = self.0.signed_in(request).await?;
        if r.contacts.len() > MAX_CONTACTS_PER_CALL {
            return Err(status(
                ErrorCode::LimitInvalid,
                "at most 1000 contacts per call",
            ));
        }
        // Every phone is a lookup, found or not.
        self.0
            .spend_lookups(me.user_id, r.contacts.len() as u32)
            .await?;
        let mut wanted = Vec::with_capacity(r.contacts.len());
        for c in &r.contacts {
            check_text("phone", &c.phone)?;
            let first_name = profile::first_name("first_name", &c.first_name)?;
            let last_name = profile::last_name("last_name", &c.last_name)?;
            let phone = c.phone.strip_prefix('+').unwrap_or(&c.phone).to_owned();
            wanted.push((c.phone.clone(), phone, first_name, last_name));
        }
        let phones: Vec<String> = wanted.iter().map(|w| w.1.clone()).collect();
        let owners: HashMap<String, i64> = people::users_by_phones(&self.0.pool, &phones)
            .await
            .map_err(Error::from)?
            .into_iter()
            .map(|(id, phone)| (phone, id))
            .collect();
        // Oneself is no contact; the others only where their rule lets the caller find them.
        let candidates: Vec<i64> = owners
            .values()
            .copied()
            .filter(|&id| id != me.user_id)
            .collect();
        let findable = self.0.findable_by_phone(me.user_id, &candidates).await?;
        let mut imported = vec![];
        let mut not_found = vec![];
        let mut names = vec![];
        for (typed, phone, first_name, last_name) in wanted {
            match owners.get(&phone).filter(|id| findable.contains(*id)) {
                Some(&user_id) => {
                    imported.push(ImportedContact {
                        phone: typed,
                        user_id,
                    });
                    names.push(ContactName {
                        contact_user_id: user_id,
                        first_name,
                        last_name,
                    });
                }
                None => not_found.push(typed),
            }
        }
        let mut tx = self.0.pool.begin().await.map_err(Error::from)?;
        let changed = people::upsert_contacts(&mut tx, me.user_id, &names)
            .await
            .map_err(Error::from)?;
        let kinds = changed.into_iter().map(contact_update).collect();
        let logged = self.0.commit_with_updates(tx, me, kinds).await?;
        let ids: Vec<i64> = imported.iter().map(|i| i.user_id).collect();
        let users = self.0.users_for(me.user_id, &ids).await?;
        Ok(Response::new(ImportedContacts {
            imported,
            not_found,
            users,
            pts: logged.pts,
            pts_count: logged.pts_count,
        }))
    }

    async fn get_contacts(
        &self,
        request: Request<GetContactsRequest>,
    ) -> Result<Response<ContactList>, Status> {
        let (me, r) = self.0.signed_in(request).await?;
        let limit = page_limit(r.limit, 20, MAX_CONTACTS_PAGE)?;
        if r.offset_user_id < 0 {
            return Err(status(ErrorCode::OffsetInvalid, "offset_user_id below 0"));
        }
        let summary = people::contacts_summary(&self.0.pool, me.user_id)
            .await
            .map_err(Error::from)?;
        // Whom of her contacts blocked her is part of what she sees of them.
        let blocked_by: Vec<i64> = self
            .0
            .blocked_by(me.user_id, &summary.ids)
            .await?
            .into_iter()
            .collect();
        let (count, hash) = (summary.count, summary.hash(&blocked_by));
        if r.hash == hash {
            return Ok(Response::new(ContactList {
                users: vec![],
                count: count as i32,
                hash,
                not_modified: true,
            }));
        }
        let ids = people::contacts_page(&self.0.pool, me.user_id, r.offset_user_id, limit)
            .await
            .map_err(Error::from)?;
        let users = self.0.users_for(me.user_id, &ids).await?;
        Ok(Response::new(ContactList {
            users,
            count: count as i32,
            hash,
            not_modified: false,
        }))
    }

    async fn delete_contacts(
        &self,
        request: Request<DeleteContactsRequest>,
    ) -> Result<Response<ContactsChanged>, Status> {
        let (me, r) = self.0.signed_in(request).await?;
        if r.user_ids.len() > MAX_CONTACTS_PER_CALL {
            return Err(status(
                ErrorCode::LimitInvalid,
                "at most 1000 contacts per call",
            ));
        }
        if r.user_ids.iter().any(|&id| id <= 0) {
            return Err(status(
                ErrorCode::UserIdInvalid,
                "a user id must be above 0",
            ));
        }
        let mut tx = self.0.pool.begin().await.map_err(Error::from)?;
        let deleted = people::delete_contacts(&mut tx, me.user_id, &r.user_ids)
            .await
            .map_err(Error::from)?;
        let kinds = deleted
            .into_iter()
            .map(|user_id| {
                update::Kind::Contact(UpdateContact {
                    user_id,
                    deleted: true,
                    ..Default::default()
                })
            })
            .collect();
        let logged = self.0.commit_with_updates(tx, me, kinds).await?;
        Ok(Response::new(ContactsChanged {
            pts: logged.pts,
            pts_count: logged.pts_count,
        }))
    }
}
