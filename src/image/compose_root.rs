//! The root filesystem of a compose cluster: simcluster's own (Debian's
//! busybox), with each service's container image unpacked whole under
//! `compose::image_dir(k)` and the scripts that run a node's service in a
//! chroot of it (written by the `compose` crate).

use std::path::Path;

use anyhow::{Context, Result};

use super::cache::KeyHasher;
use super::oci::{self, ImageError, Source};
use crate::cluster::Cluster;
use crate::BadInput;

fn source(image: &compose::ImageRef) -> Source {
    match image {
        compose::ImageRef::DockerArchive { file } => Source::DockerArchive { file: file.clone() },
        compose::ImageRef::Oci { dir, tag } => Source::Layout { dir: dir.clone(), tag: tag.clone() },
    }
}

/// An image's problem, named as the compose file writes it (exit 2).
fn named(project: &compose::Project, image: &compose::ImageRef, e: anyhow::Error) -> anyhow::Error {
    match e.downcast_ref::<ImageError>() {
        Some(ie) => {
            let users: Vec<&str> =
                project.services.iter().filter(|s| s.image == *image).map(|s| s.name.as_str()).collect();
            BadInput(format!(
                "{}: services.{}.image = {}: {}",
                project.file.display(),
                users.join(", services."),
                image.display(),
                ie.problem
            ))
            .into()
        }
        None => e,
    }
}

/// Bump when what [`unpack`] writes changes (the scripts' own source is
/// keyed whole: [`compose::SCRIPTS_RECIPE`]).
const RECIPE: &str = "compose-root-2";

/// Where Test Composer looks for templates ([antithesis] test_composer).
const TEST_COMPOSER_ROOT: &str = "opt/antithesis/test/v1";

/// Adds every image's identity and the services to the root filesystem's
/// cache key (only for a compose cluster: other keys stay as they were).
pub fn add_to_key(project: &compose::Project, cluster_file: &Path, key: &mut KeyHasher) -> Result<()> {
    key.add_str(RECIPE).add_str(compose::SCRIPTS_RECIPE);
    for image in &project.images {
        oci::add_to_key(&source(image), cluster_file, key).map_err(|e| named(project, image, e))?;
    }
    key.add_str(&format!("{:?}", project.services)).add_str(&format!("{:?}", project.disk_mount));
    Ok(())
}

/// Unpacks every image into `root` (simcluster's root filesystem, busybox
/// at /bin/busybox) and writes the compose scripts.
pub fn unpack(cluster: &Cluster, project: &compose::Project, root: &Path, work: &Path) -> Result<()> {
    use std::os::unix::fs::{symlink, PermissionsExt};
    let mut configs = Vec::new();
    for (k, image) in project.images.iter().enumerate() {
        let src = source(image);
        let scratch = work.join(format!("compose-{k}"));
        std::fs::create_dir_all(&scratch)?;
        let opened = oci::open(&src, &cluster.file, &scratch).map_err(|e| named(project, image, e))?;
        let dir = root.join(compose::image_dir(k).trim_start_matches('/'));
        std::fs::create_dir_all(dir.parent().unwrap())?;
        oci::unpack(&opened, &src, &cluster.file, &dir).map_err(|e| named(project, image, e))?;
        let own = dir.join(".simcluster");
        std::fs::create_dir_all(own.join("bin"))?;
        std::fs::copy(root.join("bin/busybox"), own.join("busybox")).context("copying busybox into an image")?;
        std::fs::set_permissions(own.join("busybox"), std::fs::Permissions::from_mode(0o755))?;
        symlink("../busybox", own.join("bin/sh"))?;
        let c = opened.config;
        configs.push(compose::ImageConfig {
            entrypoint: c.entrypoint,
            cmd: c.cmd,
            env: c.env,
            working_dir: c.working_dir,
            user: c.user,
            passwd: std::fs::read_to_string(dir.join("etc/passwd")).ok(),
            group: std::fs::read_to_string(dir.join("etc/group")).ok(),
            has_sh: std::fs::symlink_metadata(dir.join("bin/sh")).is_ok(),
        });
        let _ = std::fs::remove_dir_all(&scratch);
        test_composer_wrappers(&dir, root)?;
    }
    for (path, body) in project.guest_files(&configs).map_err(|e| BadInput(e.to_string()))? {
        let p = root.join(path.trim_start_matches('/'));
        std::fs::create_dir_all(p.parent().unwrap())?;
        std::fs::write(&p, body).with_context(|| format!("writing {}", p.display()))?;
    }
    Ok(())
}

/// Test Composer's commands are in a service's image; its runner looks
/// for them in the node's own root. For every executable
/// `/opt/antithesis/test/v1/TEMPLATE/COMMAND` of the image unpacked at
/// `image`, the root gets one of that name that runs it in the node's
/// service container (the first image that has a command wins).
fn test_composer_wrappers(image: &Path, root: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let Ok(templates) = std::fs::read_dir(image.join(TEST_COMPOSER_ROOT)) else { return Ok(()) };
    let mut templates: Vec<_> = templates.flatten().filter(|t| t.path().is_dir()).collect();
    templates.sort_by_key(|t| t.file_name());
    for t in templates {
        let mut commands: Vec<_> = std::fs::read_dir(t.path())?.flatten().collect();
        commands.sort_by_key(|c| c.file_name());
        for c in commands {
            let executable = c.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
            let (Some(tn), Some(cn)) =
                (t.file_name().to_str().map(String::from), c.file_name().to_str().map(String::from))
            else {
                continue;
            };
            let rel = format!("{TEST_COMPOSER_ROOT}/{tn}/{cn}");
            let dst = root.join(&rel);
            if !executable || dst.exists() {
                continue;
            }
            std::fs::create_dir_all(dst.parent().unwrap())?;
            let body = format!(
                "#!/sim/busybox sh\nexec /sim/busybox sh {}/enter {} \"$@\"\n",
                compose::GUEST_DIR,
                compose::shell_quote(&format!("/{rel}"))
            );
            std::fs::write(&dst, body).with_context(|| format!("writing {}", dst.display()))?;
            std::fs::set_permissions(&dst, std::fs::Permissions::from_mode(0o755))?;
        }
    }
    Ok(())
}
